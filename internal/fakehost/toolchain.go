package fakehost

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

//go:embed csrc/*.c
var csrc embed.FS

// artifact file names inside a cache entry.
const (
	artXPURT      = "libxpurt.so.1"
	artXPURT2     = "libxpurt.so.2"
	artCUDA       = "libcuda.so.1"
	artTemplate   = "libtemplate.so"
	artXPUSMI     = "xpu_smi"
	artXPUSMI5    = "xpu-smi-xre5"
	artXPUTest    = "xpu-test"
	artXPUTest5   = "xpu-test-xre5"
	artCUDAProbe  = "xpu-cuda-probe"
	artLastOfAll  = artCUDAProbe // compiled last: its presence marks a complete entry
	xre5SMILibML  = "libxpuml.so.1"
	xre5SMILibNML = "libxpunvidia-ml.so.1"
)

// toolchain holds the compiled ELF templates of one cache entry, loaded in
// memory with their patch sites.
type toolchain struct {
	dir         string // cache entry holding the compiled files
	xpurt       []byte
	xpurtSite   patchSite
	xpurt2      []byte // libxpurt.so.2 of XRE 5
	xpurt2Site  patchSite
	cuda        []byte // libcuda.so.1 of XRE 5
	template    []byte
	templateSNo patchSite
	xpuSMI      []byte
	xpuSMI5     []byte // dynamic xpu-smi of XRE 5
}

var (
	toolchainsMu sync.Mutex
	toolchains   = map[string]*toolchain{}
)

// defaultCacheDir is where compiled templates live unless WithCacheDir says
// otherwise.
func defaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory (pass a cache dir instead): %w", err)
	}
	return filepath.Join(d, "xpu-cdi", "fakehost"), nil
}

// cacheKey hashes the C sources, the compiler version and the flags, so a
// change of any of them compiles afresh.
func cacheKey(cc string) (string, error) {
	h := sha256.New()
	entries, err := csrc.ReadDir("csrc")
	if err != nil {
		return "", fmt.Errorf("reading embedded C sources: %w", err)
	}
	for _, e := range entries {
		b, err := csrc.ReadFile("csrc/" + e.Name())
		if err != nil {
			return "", fmt.Errorf("reading embedded %s: %w", e.Name(), err)
		}
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	// One option per run: gcc prints only the first of several -dump
	// options, and the target machine is what tells a cross compiler's
	// entry from the native one's.
	for _, opt := range []string{"-dumpfullversion", "-dumpmachine"} {
		out, err := exec.Command(cc, opt).Output()
		if err != nil {
			return "", fmt.Errorf("running %s %s (a C compiler is needed to build fake hosts; install gcc and libc6-dev, "+
				"or gcc-aarch64-linux-gnu and libc6-dev-arm64-cross for aarch64 hosts: make deps): %w", cc, opt, err)
		}
		h.Write(out)
	}
	fmt.Fprintf(h, "flags-v2 %v %v %v %v\n", xpurtFlags(), xpurt2Flags(), templateFlags(), staticFlags)
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

func xpurtFlags() []string {
	return []string{"-O2", "-fPIC", "-shared", "-Wl,-soname,libxpurt.so.1"}
}

func xpurt2Flags() []string {
	return []string{"-O2", "-fPIC", "-shared", "-Wl,-soname,libxpurt.so.2"}
}

func templateFlags() []string {
	return []string{"-O2", "-fPIC", "-shared", "-Wl,-soname," + sonamePlaceholder}
}

var staticFlags = []string{"-O2", "-static"}

// loadToolchain returns the compiled templates for cacheDir, compiling them
// on first use. Concurrent processes sharing a cache each compile into a
// private directory and rename it into place; the loser discards its copy.
func loadToolchain(cacheDir, cc string) (*toolchain, error) {
	toolchainsMu.Lock()
	defer toolchainsMu.Unlock()
	if tc, ok := toolchains[cacheDir+"\x00"+cc]; ok {
		return tc, nil
	}
	key, err := cacheKey(cc)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cacheDir, key)
	if _, err := os.Stat(filepath.Join(dir, artLastOfAll)); errors.Is(err, os.ErrNotExist) {
		if err := compileAll(cacheDir, dir, cc); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("checking build cache %s: %w", dir, err)
	}
	tc := &toolchain{dir: dir}
	for _, r := range []struct {
		name string
		dst  *[]byte
	}{
		{artXPURT, &tc.xpurt},
		{artXPURT2, &tc.xpurt2},
		{artCUDA, &tc.cuda},
		{artTemplate, &tc.template},
		{artXPUSMI, &tc.xpuSMI},
		{artXPUSMI5, &tc.xpuSMI5},
	} {
		b, err := os.ReadFile(filepath.Join(dir, r.name))
		if err != nil {
			return nil, fmt.Errorf("reading cached %s: %w", r.name, err)
		}
		*r.dst = b
	}
	if tc.xpurtSite, err = findPlaceholder(tc.xpurt, ".rodata", versionPlaceholder); err != nil {
		return nil, fmt.Errorf("cached %s: %w", filepath.Join(dir, artXPURT), err)
	}
	if tc.xpurt2Site, err = findPlaceholder(tc.xpurt2, ".rodata", versionPlaceholder); err != nil {
		return nil, fmt.Errorf("cached %s: %w", filepath.Join(dir, artXPURT2), err)
	}
	if tc.templateSNo, err = findPlaceholder(tc.template, ".dynstr", sonamePlaceholder); err != nil {
		return nil, fmt.Errorf("cached %s: %w", filepath.Join(dir, artTemplate), err)
	}
	toolchains[cacheDir+"\x00"+cc] = tc
	return tc, nil
}

// compileAll compiles every artifact into a temporary directory and renames
// it to dir.
func compileAll(cacheDir, dir, cc string) error {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return fmt.Errorf("creating build cache %s: %w", cacheDir, err)
	}
	tmp, err := os.MkdirTemp(cacheDir, ".build-")
	if err != nil {
		return fmt.Errorf("creating a build directory in %s: %w", cacheDir, err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", src, err)
	}
	for _, name := range []string{"xpurt.c", "template.c", "xpu_smi.c", "xpu_test.c", "cuda.c", "cuda_probe.c"} {
		b, err := csrc.ReadFile("csrc/" + name)
		if err != nil {
			return fmt.Errorf("reading embedded %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	out := filepath.Join(tmp, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", out, err)
	}
	// XRE 5's xpu-smi is linked against libraries with the SONAMEs of the
	// real one's; these link-time stand-ins are not kept (the tree gets
	// template copies with the same SONAMEs).
	stubs := filepath.Join(tmp, "stubs")
	if err := os.Mkdir(stubs, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", stubs, err)
	}
	steps := [][]string{
		append(xpurtFlags(), "-o", filepath.Join(out, artXPURT), filepath.Join(src, "xpurt.c")),
		append(xpurt2Flags(), "-o", filepath.Join(out, artXPURT2), filepath.Join(src, "xpurt.c")),
		{"-O2", "-fPIC", "-shared", "-Wl,-soname," + artCUDA, "-o", filepath.Join(out, artCUDA), filepath.Join(src, "cuda.c")},
		append(templateFlags(), "-o", filepath.Join(out, artTemplate), filepath.Join(src, "template.c")),
		{"-O2", "-fPIC", "-shared", "-Wl,-soname," + xre5SMILibML, "-o", filepath.Join(stubs, xre5SMILibML), filepath.Join(src, "template.c")},
		{"-O2", "-fPIC", "-shared", "-Wl,-soname," + xre5SMILibNML, "-o", filepath.Join(stubs, xre5SMILibNML), filepath.Join(src, "template.c")},
		append(append([]string{}, staticFlags...), "-o", filepath.Join(out, artXPUSMI), filepath.Join(src, "xpu_smi.c")),
		{
			"-O2", "-DXPU_SMI_XRE5", "-o", filepath.Join(out, artXPUSMI5), filepath.Join(src, "xpu_smi.c"),
			"-L" + stubs, "-Wl,--no-as-needed", "-l:" + xre5SMILibML, "-l:" + xre5SMILibNML,
		},
		{"-O2", "-o", filepath.Join(out, artXPUTest), filepath.Join(src, "xpu_test.c"), "-L" + out, "-l:" + artXPURT},
		{"-O2", "-o", filepath.Join(out, artXPUTest5), filepath.Join(src, "xpu_test.c"), "-L" + out, "-l:" + artXPURT2},
		{"-O2", "-o", filepath.Join(out, artCUDAProbe), filepath.Join(src, "cuda_probe.c"), "-ldl"},
	}
	for _, args := range steps {
		cmd := exec.Command(cc, args...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("compiling fake host artifacts (%s %v): %w\n%s", cc, args, err, b)
		}
	}
	if err := os.Rename(out, dir); err != nil {
		// Another process won the race: use its copy.
		if _, statErr := os.Stat(filepath.Join(dir, artLastOfAll)); statErr == nil {
			return nil
		}
		return fmt.Errorf("installing build cache %s: %w", dir, err)
	}
	return nil
}

// xpurtImage returns a libxpurt.so.1 image reporting version.
func (tc *toolchain) xpurtImage(version string) ([]byte, error) {
	img := append([]byte(nil), tc.xpurt...)
	if err := tc.xpurtSite.patch(img, version); err != nil {
		return nil, fmt.Errorf("setting the libxpurt version: %w", err)
	}
	return img, nil
}

// xpurt2Image returns a libxpurt.so.2 (XRE 5) image reporting version.
func (tc *toolchain) xpurt2Image(version string) ([]byte, error) {
	img := append([]byte(nil), tc.xpurt2...)
	if err := tc.xpurt2Site.patch(img, version); err != nil {
		return nil, fmt.Errorf("setting the libxpurt version: %w", err)
	}
	return img, nil
}

// image returns the ELF image of the library with this SONAME: libxpurt
// and libcuda have code the tests call, every other library is a template
// copy.
func (tc *toolchain) image(soname, version string) ([]byte, error) {
	switch soname {
	case artXPURT:
		return tc.xpurtImage(version)
	case artXPURT2:
		return tc.xpurt2Image(version)
	case artCUDA:
		return append([]byte(nil), tc.cuda...), nil
	}
	return tc.libraryImage(soname)
}

// libraryImage returns a shared object image whose SONAME is soname.
func (tc *toolchain) libraryImage(soname string) ([]byte, error) {
	img := append([]byte(nil), tc.template...)
	if err := tc.templateSNo.patch(img, soname); err != nil {
		return nil, fmt.Errorf("setting SONAME %s: %w", soname, err)
	}
	return img, nil
}
