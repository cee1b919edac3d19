package fakehost

import (
	"fmt"
	"runtime"

	"github.com/xpu-cdi/xpu-cdi/internal/elfso"
)

// crossCompilers are the C compilers that build each machine's ELF files
// on a host of another machine (Debian's gcc-<triplet> packages; make deps
// installs gcc-aarch64-linux-gnu and its C library).
var crossCompilers = map[string]string{
	"amd64": "x86_64-linux-gnu-gcc",
	"arm64": "aarch64-linux-gnu-gcc",
}

// multiarchLibDirs are the multiarch system library directories of each
// machine.
var multiarchLibDirs = map[string]string{
	"amd64": "/lib/x86_64-linux-gnu",
	"arm64": "/lib/aarch64-linux-gnu",
}

// SystemLibDirFor is the multiarch system library directory of a machine
// (a Go architecture name): /lib/x86_64-linux-gnu, /lib/aarch64-linux-gnu.
func SystemLibDirFor(goarch string) string { return multiarchLibDirs[goarch] }

// machine is the Go architecture the host's ELF files are built for: Arch,
// or the machine the tests run on.
func (h *Host) machine() string {
	if h.Arch == "" {
		return runtime.GOARCH
	}
	return h.Arch
}

// ldArch is the ldcache description of the host's machine.
func (h *Host) ldArch() (elfso.Arch, error) {
	a, err := elfso.ArchByGOARCH(h.machine())
	if err != nil {
		return elfso.Arch{}, fmt.Errorf("fake host: %w", err)
	}
	return a, nil
}

// compiler returns the C compiler for ELF files of machine goarch: the
// WithCompiler one for this machine, else the cross compiler
// (WithCrossCompiler, or Debian's gcc-<triplet>).
func (o *options) compiler(goarch string) (string, error) {
	if goarch == "" || goarch == runtime.GOARCH {
		return o.cc, nil
	}
	if cc, ok := o.crossCC[goarch]; ok {
		return cc, nil
	}
	if cc, ok := crossCompilers[goarch]; ok {
		return cc, nil
	}
	return "", fmt.Errorf("fake host: no C compiler known for architecture %q (pass WithCrossCompiler)", goarch)
}
