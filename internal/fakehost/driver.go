package fakehost

import (
	"fmt"
	"os"
	"path/filepath"
)

// XRE paths inside the tree.
const (
	XRELink       = "/usr/local/xpu"
	XPUSMIPath    = "/usr/local/xpu/bin/xpu_smi"
	XPUSMILink    = "/usr/local/bin/xpu-smi"
	LdSoConfPath  = "/etc/ld.so.conf.d/xpu.conf"
	LdCachePath   = "/etc/ld.so.cache"
	XRELibDir     = XRELink + "/lib64" // as ld.so.conf.d names it
	UdevRulesPath = "/etc/udev/rules.d/99-kunlun.rules"
)

// XRE 5 paths inside the tree.
const (
	// XRE5LibDir holds the user-space libraries of XRE 5 (not in ld.so.cache).
	XRE5LibDir = XRELink + "/so"
	// XPUSMI5Path is XRE 5's xpu-smi; /usr/local/bin/xpu-smi and
	// /usr/local/bin/xpu_smi link to it.
	XPUSMI5Path  = "/usr/local/xpu/bin/xpu-smi"
	XPUSMI5Alias = "/usr/local/bin/xpu_smi"
	// SystemLibDir is the multiarch system library directory, where XRE 5
	// puts libxpunvidia-ml.
	SystemLibDir = "/lib/x86_64-linux-gnu"
)

// XREDir is the versioned install directory the /usr/local/xpu link names.
func XREDir(version string) string { return "/usr/local/xpu-" + version }

// xre5Subdirs are the directories of an XRE 5 install.
var xre5Subdirs = []string{"bin", "include", "lib", "so", "tools", "profiler"}

// buildDriver writes the XRE: libraries, links, xpu_smi, ld.so.conf.d and
// ld.so.cache, and the udev rule when the host has one.
func (b *builder) buildDriver() error {
	h := b.h
	if h.UdevRule {
		if err := b.writeText(UdevRulesPath, "KERNEL==\"xpu*\", MODE=\"0666\"\n", 0o644); err != nil {
			return err
		}
	}
	if h.NoDriver {
		return nil
	}
	cc, err := b.o.compiler(h.Arch)
	if err != nil {
		return err
	}
	tc, err := loadToolchain(b.o.cacheDir, cc)
	if err != nil {
		return err
	}
	xre := XREDir(h.XREVersion)
	dirs := []string{"lib64"}
	if h.XRE5() {
		dirs = xre5Subdirs
	}
	for _, d := range dirs {
		if err := b.mkdir(xre + "/" + d); err != nil {
			return err
		}
	}
	if err := b.symlink(xre, XRELink); err != nil {
		return err
	}
	b.t.XREDir, b.t.XRELink = xre, XRELink
	for _, l := range h.Libraries {
		img, err := tc.image(l.SONAME, h.XREVersion)
		if err != nil {
			return fmt.Errorf("library %s: %w", l.File, err)
		}
		dir := l.libDir(xre)
		p := dir + "/" + l.File
		if err := b.writeFile(p, img, 0o755); err != nil {
			return err
		}
		b.t.Libraries = append(b.t.Libraries, TreeLibrary{Path: p, SONAME: l.SONAME})
		if l.SONAME != l.File { // ldconfig would create the SONAME link
			if err := b.symlink(p, dir+"/"+l.SONAME); err != nil {
				return err
			}
		}
		for _, dl := range l.DevLinks {
			if err := b.symlink(p, dir+"/"+dl); err != nil {
				return err
			}
		}
	}
	if err := b.buildTools(tc, xre); err != nil {
		return err
	}
	if !h.XRE5() { // XRE 5 does not register so/ with the loader
		if err := b.writeText(LdSoConfPath, XRELibDir+"\n", 0o644); err != nil {
			return err
		}
		b.t.LdSoConf = LdSoConfPath
	}
	return b.buildLdCache()
}

// buildTools writes xpu-smi and the state file of its telemetry
// (XPUSMIStatePath): XRE 4's static xpu_smi, linked from
// /usr/local/bin/xpu-smi, or XRE 5's dynamic xpu-smi, linked from
// /usr/local/bin/xpu-smi and /usr/local/bin/xpu_smi. The links go through
// /usr/local/xpu like the vendor's installer.
func (b *builder) buildTools(tc *toolchain, xre string) error {
	if b.h.NoXPUSMI {
		return nil
	}
	file, img, links := xre+"/bin/xpu_smi", tc.xpuSMI, []string{XPUSMILink}
	via := XPUSMIPath
	if b.h.XRE5() {
		file, img, links = xre+"/bin/xpu-smi", tc.xpuSMI5, []string{XPUSMILink, XPUSMI5Alias}
		via = XPUSMI5Path
	}
	if err := b.writeFile(file, img, 0o755); err != nil {
		return err
	}
	b.t.Tools = append(b.t.Tools, via)
	for _, l := range links {
		if err := b.symlink(via, l); err != nil {
			return err
		}
		b.t.Tools = append(b.t.Tools, l)
	}
	return WriteXPUSMIState(b.root, DefaultTelemetry(b.t))
}

// BuildTestProgram writes xpu-test, a dynamically linked glibc program that
// needs libxpurt.so.1 and prints the device count and the XRE version, to
// dst (mode 0755). It exits 0 when the library loads.
func BuildTestProgram(dst string, opts ...Option) error {
	return copyArtifact(artXPUTest, dst, opts)
}

// BuildTestProgramXRE5 writes xpu-test-xre5: xpu-test linked against
// libxpurt.so.2, the runtime of XRE 5.
func BuildTestProgramXRE5(dst string, opts ...Option) error {
	return copyArtifact(artXPUTest5, dst, opts)
}

// BuildCUDAProbe writes xpu-cuda-probe, a glibc program that dlopens
// libcuda.so.1 and prints the path, device:inode and origin of the file
// the loader gave it ("libcuda.so.1 origin: kunlun-xre" for the fake XRE's
// copy).
func BuildCUDAProbe(dst string, opts ...Option) error {
	return copyArtifact(artCUDAProbe, dst, opts)
}

// copyArtifact copies a compiled program of the build cache to dst.
func copyArtifact(name, dst string, opts []Option) error {
	o, err := newOptions(opts)
	if err != nil {
		return err
	}
	cc, err := o.compiler(o.arch)
	if err != nil {
		return err
	}
	tc, err := loadToolchain(o.cacheDir, cc)
	if err != nil {
		return err
	}
	src := filepath.Join(tc.dir, name)
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading cached %s: %w", src, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("creating directory for %s: %w", dst, err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	if err := os.Chmod(dst, 0o755); err != nil {
		return fmt.Errorf("setting mode of %s: %w", dst, err)
	}
	return nil
}
