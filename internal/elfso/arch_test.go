package elfso_test

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/elfso"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// buildAarch64Lib cross-compiles an aarch64 shared object with soname.
func buildAarch64Lib(t *testing.T, out, soname string) {
	t.Helper()
	cc := "gcc"
	if runtime.GOARCH != "arm64" {
		cc = testreq.Tool(t, "aarch64-linux-gnu-gcc")
	}
	src := filepath.Join(t.TempDir(), "lib.c")
	require.NoError(t, os.WriteFile(src, []byte("int xpu_arch_probe(void) { return 64; }\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Dir(out), 0o755))
	b, err := exec.Command(cc, "-shared", "-fPIC", "-o", out, "-Wl,-soname,"+soname, src).CombinedOutput()
	require.NoError(t, err, "%s: %s", cc, b)
}

// TestAarch64SonameAndFlags reads an aarch64 shared object as ldconfig does:
// its SONAME, the machine, and glibc's aarch64 cache flags
// (FLAG_AARCH64_LIB64|FLAG_ELF_LIBC6 = 0x0a03, not x86-64's 0x0303). The
// hook's folder scan is tested with the same file in internal/hook.
func TestAarch64SonameAndFlags(t *testing.T) {
	dir := t.TempDir()
	buildAarch64Lib(t, filepath.Join(dir, "usr/lib/xpu/libarm.so.1.2"), "libarm.so.1")

	f, err := os.Open(filepath.Join(dir, "usr/lib/xpu/libarm.so.1.2"))
	require.NoError(t, err)
	defer f.Close()
	var sr elfso.SonameReader
	info, err := sr.ReadInfo(f)
	require.NoError(t, err)
	require.Equal(t, elfso.Info{Soname: "libarm.so.1", Flags: 0x0a03, Machine: elf.EM_AARCH64}, info)

	arm, err := elfso.ArchByGOARCH("arm64")
	require.NoError(t, err)
	require.Equal(t, int32(0x0a03), arm.Flags)
	require.Equal(t, elf.EM_AARCH64, arm.Machine)
	amd, err := elfso.ArchByGOARCH("amd64")
	require.NoError(t, err)
	require.Equal(t, int32(0x0303), amd.Flags)
}

func TestArchByGOARCH(t *testing.T) {
	_, err := elfso.ArchByGOARCH("riscv64")
	require.ErrorContains(t, err, `architecture "riscv64" is not supported (supported: [amd64 arm64])`)
	native, ok := elfso.NativeArch()
	require.Equal(t, runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64", ok)
	if ok {
		require.Equal(t, runtime.GOARCH, native.GOARCH)
	}
}

func TestMachineName(t *testing.T) {
	for _, tc := range []struct {
		machine elf.Machine
		want    string
	}{
		{elf.EM_X86_64, "x86-64"},
		{elf.EM_AARCH64, "aarch64"},
		{elf.EM_RISCV, "EM_RISCV"},
		{elf.Machine(0xbeef), "unknown machine 0xbeef"},
		{elf.Machine(0), "EM_NONE"},
	} {
		t.Run(tc.want, func(t *testing.T) { require.Equal(t, tc.want, elfso.MachineName(tc.machine)) })
	}
}
