package fakehost_test

import (
	"debug/elf"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/elfso"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

func elfMachine(t *testing.T, path string) elf.Machine {
	t.Helper()
	f, err := elf.Open(path)
	require.NoError(t, err, path)
	defer f.Close()
	return f.Machine
}

// TestR200Arm64 builds the aarch64 shape: every library, xpu_smi and the
// test program are aarch64 ELF files (compiled by the cross compiler, in
// a cache entry of their own beside the native one), the SONAMEs are the
// real ones, and ld.so.cache carries aarch64's flags.
func TestR200Arm64(t *testing.T) {
	if runtime.GOARCH != "arm64" {
		testreq.Tool(t, "aarch64-linux-gnu-gcc")
	}
	cache := t.TempDir()
	tr, err := fakehost.Build(t.TempDir(), fakehost.R200Arm64(), fakehost.WithCacheDir(cache), fakehost.WithoutMknod())
	require.NoError(t, err)
	require.Equal(t, "arm64", tr.Host.Arch)
	require.Len(t, tr.Devices, 2)
	require.Len(t, tr.ComputeDevices(), 2)

	var sr elfso.SonameReader
	for _, l := range tr.Libraries {
		f, err := os.Open(tr.Path(l.Path))
		require.NoError(t, err)
		info, err := sr.ReadInfo(f)
		require.NoError(t, f.Close())
		require.NoError(t, err, l.Path)
		require.Equal(t, elfso.Info{Soname: l.SONAME, Flags: 0x0a03, Machine: elf.EM_AARCH64}, info, l.Path)
	}
	require.Len(t, tr.Libraries, len(fakehost.CoreLibraries()))
	require.Equal(t, elf.EM_AARCH64, elfMachine(t, tr.Path(fakehost.XPUSMIPath)))

	data, err := os.ReadFile(tr.Path(fakehost.LdCachePath))
	require.NoError(t, err)
	entries, err := ldcache.Parse(data)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		require.Equal(t, int32(0x0a03), e.Flags, "%s", e.Name)
	}

	prog := filepath.Join(t.TempDir(), "xpu-test")
	require.NoError(t, fakehost.BuildTestProgram(prog, fakehost.WithArch("arm64"), fakehost.WithCacheDir(cache)))
	require.Equal(t, elf.EM_AARCH64, elfMachine(t, prog))
	if runtime.GOARCH != "arm64" {
		native := filepath.Join(t.TempDir(), "xpu-test")
		require.NoError(t, fakehost.BuildTestProgram(native, fakehost.WithCacheDir(cache)))
		require.NotEqual(t, elf.EM_AARCH64, elfMachine(t, native), "the native program must not come from the cross compiler's cache entry")
	}

	_, err = fakehost.Build(t.TempDir(), fakehost.Host{Shape: "x", Arch: "mips", Major: 1, XREVersion: "1"}, fakehost.WithCacheDir(cache))
	require.ErrorContains(t, err, `fake host: architecture "mips" is not supported`)
	require.Equal(t, "/lib/aarch64-linux-gnu", fakehost.SystemLibDirFor("arm64"))
}
