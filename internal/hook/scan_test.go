package hook

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

func TestScanLibraries(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	lib := filepath.Join(root, "opt/foo/lib")
	buildLib(t, filepath.Join(lib, "libfoo.so.1.2.3"), "libfoo.so.1")
	require.NoError(t, os.Symlink("libfoo.so.1.2.3", filepath.Join(lib, "libfoo.so.1")))
	require.NoError(t, os.Symlink("libfoo.so.1", filepath.Join(lib, "libfoo.so")))
	// Two versions of libbar with the same SONAME and no SONAME link: the
	// higher version wins.
	buildLib(t, filepath.Join(lib, "libbar.so.2.9"), "libbar.so.2")
	buildLib(t, filepath.Join(lib, "libbar.so.2.10"), "libbar.so.2")
	// Not libraries / not candidates.
	require.NoError(t, os.WriteFile(filepath.Join(lib, "libtext.so.1"), []byte("not ELF"), 0o644))
	buildLib(t, filepath.Join(lib, "plugin.so"), "plugin.so")
	// A library outside the root and an absolute symlink to it: resolved
	// inside the root, it points at nothing.
	buildLib(t, filepath.Join(outside, "libevil.so.1"), "libevil.so.1")
	require.NoError(t, os.Symlink(filepath.Join(outside, "libevil.so.1"), filepath.Join(lib, "libevil.so.1")))
	require.NoError(t, os.Symlink("../../../../../.."+outside+"/libevil.so.1", filepath.Join(lib, "libevil2.so.1")))
	// A library dir that is an absolute symlink to the outside dir.
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "evil")))
	// A library reached through a symlink inside the root.
	buildLib(t, filepath.Join(root, "usr/lib/libbaz.so.5"), "libbaz.so.5")
	require.NoError(t, os.Symlink("/usr/lib/libbaz.so.5", filepath.Join(lib, "libbaz.so.5")))

	entries, err := scanLibraries(openRoot(t, root), []string{"/opt/foo/lib", "/missing", "/evil", "opt/foo/lib/"}, logger.Discard)
	require.NoError(t, err)
	flags := cacheFlagsOfHost(t)
	require.Equal(t, []ldcache.Entry{
		{Name: "libbar.so.2", Path: "/opt/foo/lib/libbar.so.2.10", Flags: flags},
		{Name: "libbaz.so.5", Path: "/opt/foo/lib/libbaz.so.5", Flags: flags},
		{Name: "libfoo.so.1", Path: "/opt/foo/lib/libfoo.so.1", Flags: flags},
	}, entries)
}

// cacheFlagsOfHost returns the flags the host's ldconfig gives libc.
func cacheFlagsOfHost(t testing.TB) int32 {
	data, err := os.ReadFile("/etc/ld.so.cache")
	require.NoError(t, err)
	entries, err := ldcache.Parse(data)
	require.NoError(t, err)
	for _, e := range entries {
		if e.Name == "libc.so.6" {
			return e.Flags
		}
	}
	t.Fatal("no libc.so.6 in the host cache")
	return 0
}

// TestScanLibrariesAarch64 scans a folder of an aarch64 shared object:
// its entry carries glibc's aarch64 cache flags (0x0a03), whatever the
// machine the hook runs on, as ldconfig records them.
func TestScanLibrariesAarch64(t *testing.T) {
	cc := "gcc"
	if runtime.GOARCH != "arm64" {
		cc = testreq.Tool(t, "aarch64-linux-gnu-gcc")
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "usr/lib/xpu/libarm.so.1.2")
	src := filepath.Join(t.TempDir(), "lib.c")
	require.NoError(t, os.WriteFile(src, []byte("int xpu_arch_probe(void) { return 64; }\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Dir(lib), 0o755))
	b, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, "-Wl,-soname,libarm.so.1", src).CombinedOutput()
	require.NoError(t, err, "%s: %s", cc, b)
	require.NoError(t, os.Symlink("libarm.so.1.2", filepath.Join(dir, "usr/lib/xpu/libarm.so.1")))

	entries, err := scanLibraries(openRoot(t, dir), []string{"/usr/lib/xpu"}, logger.Discard)
	require.NoError(t, err)
	require.Equal(t, []ldcache.Entry{{Name: "libarm.so.1", Path: "/usr/lib/xpu/libarm.so.1", Flags: 0x0a03}}, entries)
}
