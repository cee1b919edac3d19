package fakehost

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

func soname(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, elf.ET_DYN, f.Type, path)
	require.Equal(t, elf.EM_X86_64, f.Machine, path)
	names, err := f.DynString(elf.DT_SONAME)
	require.NoError(t, err)
	require.Len(t, names, 1, path)
	return names[0]
}

// checkLibraries checks every library file's SONAME, libxpurt's exports and
// the ld.so.cache built for the tree.
func checkLibraries(t *testing.T, tr *Tree) {
	t.Helper()
	if tr.Host.NoDriver {
		return
	}
	// viaLink is the directory of a library as the loader and the XRE's
	// users see it: through /usr/local/xpu, or the system directory.
	viaLink := func(l Library) string {
		if strings.HasPrefix(l.Dir, "/") {
			return l.Dir
		}
		return strings.Replace(l.libDir(tr.XREDir), tr.XREDir, XRELink, 1)
	}
	require.Len(t, tr.Libraries, len(tr.Host.Libraries))
	for i, l := range tr.Libraries {
		require.Equal(t, l.SONAME, soname(t, tr.Path(l.Path)), l.Path)
		// The loader's view through /usr/local/xpu works too.
		require.FileExists(t, tr.Path(viaLink(tr.Host.Libraries[i])+"/"+l.SONAME))
	}
	for _, l := range tr.Host.Libraries {
		for _, dl := range l.DevLinks {
			target, err := os.Readlink(tr.Path(viaLink(l) + "/" + dl))
			require.NoError(t, err)
			require.Equal(t, l.File, target)
		}
	}
	if tr.Host.XRE5() {
		require.False(t, exists(tr, LdSoConfPath), "XRE 5 does not register so/ with the loader")
	} else {
		require.Equal(t, XRELibDir+"\n", readTree(t, tr, LdSoConfPath))
	}
	data, err := os.ReadFile(tr.Path(LdCachePath))
	require.NoError(t, err)
	entries, err := ldcache.Parse(data)
	require.NoError(t, err)
	got := map[string]string{}
	for _, e := range entries {
		require.Equal(t, ldcache.FlagELFLibc6|ldcache.FlagX8664Lib64, e.Flags, e.Name)
		got[e.Name] = e.Path
		require.FileExists(t, tr.Path(e.Path), "cache entry %s points outside the tree's files", e.Name)
	}
	want := map[string]string{}
	for _, l := range tr.Host.Libraries {
		dir := viaLink(l)
		if tr.Host.XRE5() && !strings.HasPrefix(l.Dir, "/") {
			continue // so/ is not in the cache
		}
		want[l.SONAME] = dir + "/" + l.SONAME
		for _, dl := range l.DevLinks {
			want[dl] = dir + "/" + dl
		}
	}
	require.Equal(t, want, got)
}

func TestLibxpurtExports(t *testing.T) {
	tr := build(t, K200())
	f, err := elf.Open(tr.Path(XRELibDir + "/libxpurt.so.1"))
	require.NoError(t, err)
	defer f.Close()
	syms, err := f.DynamicSymbols()
	require.NoError(t, err)
	exported := map[string]bool{}
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			exported[s.Name] = true
		}
	}
	require.True(t, exported["xpurt_device_count"])
	require.True(t, exported["xpurt_version"])
}

func TestTemplatePatching(t *testing.T) {
	tc, err := loadToolchain(t.TempDir(), "gcc")
	require.NoError(t, err)
	dir := t.TempDir()
	names := []string{"a", "libx.so", "libxpuext0499.so.1", sonamePlaceholder[:len(sonamePlaceholder)-1] + "Z"}
	for i, name := range names {
		img, err := tc.libraryImage(name)
		require.NoError(t, err)
		require.Len(t, img, len(tc.template))
		p := filepath.Join(dir, fmt.Sprintf("lib%d.so", i))
		require.NoError(t, os.WriteFile(p, img, 0o755))
		require.Equal(t, name, soname(t, p))
		require.NotContains(t, string(img), "XPU_FAKEHOST_SONAME_PLACEHOLDER"[:20]+"_", "placeholder left in %s", name)
	}
	require.True(t, bytes.Contains(tc.template, []byte(sonamePlaceholder)), "the template itself is left untouched")
	_, err = tc.libraryImage(sonamePlaceholder + "x")
	require.ErrorContains(t, err, "does not fit")
	_, err = tc.libraryImage("")
	require.ErrorContains(t, err, "does not fit")
	_, err = tc.xpurtImage(strings.Repeat("9", 64))
	require.ErrorContains(t, err, "does not fit")

	_, err = findPlaceholder([]byte("not an ELF file"), ".dynstr", sonamePlaceholder)
	require.ErrorContains(t, err, "parsing ELF")
	_, err = findPlaceholder(tc.xpuSMI, ".dynstr", sonamePlaceholder)
	require.ErrorIs(t, err, errPlaceholder)
}

func TestXPUSMI(t *testing.T) {
	for _, mknod := range []bool{true, false} {
		t.Run(fmt.Sprintf("mknod=%v", mknod), func(t *testing.T) {
			var opts []Option
			if !mknod {
				opts = append(opts, WithoutMknod())
			}
			tr := build(t, R200SRIOV(), opts...)
			f, err := elf.Open(tr.Path(XPUSMIPath))
			require.NoError(t, err)
			for _, p := range f.Progs {
				require.NotEqual(t, elf.PT_INTERP, p.Type, "xpu_smi must be static")
			}
			require.NoError(t, f.Close())
			cmd := exec.Command(tr.Path(XPUSMILink))
			cmd.Env = []string{"XPU_FAKEHOST_ROOT=" + tr.Root}
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, string(out))
			s := string(out)
			require.Contains(t, s, "Driver Version: 4.33.0")
			require.Contains(t, s, "5 device(s) found")
			for _, d := range tr.Devices {
				mm := fmt.Sprintf("%d:%d", d.Major, d.Minor)
				if !tr.RealNodes {
					mm = "0:0"
				}
				require.Regexp(t, fmt.Sprintf(`\| %-5d \| %-18s \| %-13s \|`, d.Index, d.Path, mm), s)
			}
			require.NotContains(t, s, "xpuctrl")
		})
	}
}

func TestTestProgram(t *testing.T) {
	tr := build(t, P800x8())
	bin := filepath.Join(t.TempDir(), "xpu-test")
	require.NoError(t, BuildTestProgram(bin))
	f, err := elf.Open(bin)
	require.NoError(t, err)
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Contains(t, libs, "libxpurt.so.1")

	cmd := exec.Command(bin)
	cmd.Env = []string{"LD_LIBRARY_PATH=" + tr.Path(XRELibDir), "XPU_FAKEHOST_ROOT=" + tr.Root}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, "xpu devices: 8\nxpurt version: 5.0.21.21\n", string(out))

	cmd = exec.Command(bin)
	cmd.Env = []string{"LD_LIBRARY_PATH=" + t.TempDir()}
	out, err = cmd.CombinedOutput()
	require.Error(t, err, "without the library the program must fail")
	require.Contains(t, string(out), "libxpurt.so.1")
}

// TestLdCacheInChroot proves the generated ld.so.cache is usable by the real
// loader: in a chroot holding only glibc, the tree and xpu-test, the program
// finds libxpurt.so.1 through /etc/ld.so.cache alone.
func TestLdCacheInChroot(t *testing.T) {
	testreq.Root(t, "mknod, chown, chroot")
	h := P800x8()
	h.XREVersion = "5.1.0.7"
	tr := build(t, h)
	require.NoError(t, BuildTestProgram(tr.Path("/bin/xpu-test")))
	for _, lib := range []string{"/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6"} {
		data, err := os.ReadFile(lib)
		if err != nil {
			testreq.Missing(t, "glibc layout of this machine unknown: %v", err)
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(tr.Path(lib)), 0o755))
		require.NoError(t, os.WriteFile(tr.Path(lib), data, 0o755))
	}
	cmd := exec.Command("chroot", tr.Root, "/bin/xpu-test")
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, "xpu devices: 8\nxpurt version: 5.1.0.7\n", string(out))
}

// TestXRE5Programs checks the programs of the XRE 5 shape: xpu-smi is
// linked against libxpuml.so.1 and libxpunvidia-ml.so.1 and fails without
// them, xpu-test-xre5 needs libxpurt.so.2, xpu-cuda-probe dlopens
// libcuda.so.1 and reports the XRE copy.
func TestXRE5Programs(t *testing.T) {
	tr := build(t, P800XRE5())
	f, err := elf.Open(tr.Path(XPUSMI5Path))
	require.NoError(t, err)
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Subset(t, libs, []string{"libxpuml.so.1", "libxpunvidia-ml.so.1"})

	so, sys := tr.Path(XRE5LibDir), tr.Path(SystemLibDir)
	for _, tc := range []struct {
		description string
		bin         string
		libPath     string
		want        []string
		fails       string
	}{
		{description: "xpu-smi without its libraries", bin: tr.Path(XPUSMILink), libPath: t.TempDir(), fails: "libxpuml.so.1"},
		{description: "xpu-smi without libxpunvidia-ml", bin: tr.Path(XPUSMI5Alias), libPath: so, fails: "libxpunvidia-ml.so.1"},
		{description: "xpu-smi", bin: tr.Path(XPUSMILink), libPath: so + ":" + sys, want: []string{"XPU-SMI 5", "8 device(s) found"}},
		{description: "xpu-test-xre5", bin: "xpu-test-xre5", libPath: so, want: []string{"xpu devices: 8\nxpurt version: " + XREVersionP800 + "\n"}},
		{description: "xpu-test-xre5 without libxpurt.so.2", bin: "xpu-test-xre5", libPath: t.TempDir(), fails: "libxpurt.so.2"},
		{description: "xpu-cuda-probe", bin: "xpu-cuda-probe", libPath: so, want: []string{"libcuda.so.1 path: " + so + "/libcuda.so.1\n", "libcuda.so.1 origin: kunlun-xre\n"}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			bin := tc.bin
			switch bin {
			case "xpu-test-xre5":
				bin = filepath.Join(t.TempDir(), bin)
				require.NoError(t, BuildTestProgramXRE5(bin))
			case "xpu-cuda-probe":
				bin = filepath.Join(t.TempDir(), bin)
				require.NoError(t, BuildCUDAProbe(bin))
			}
			cmd := exec.Command(bin)
			cmd.Env = []string{"LD_LIBRARY_PATH=" + tc.libPath, "XPU_FAKEHOST_ROOT=" + tr.Root}
			out, err := cmd.CombinedOutput()
			if tc.fails != "" {
				require.Error(t, err, string(out))
				require.Contains(t, string(out), tc.fails)
				return
			}
			require.NoError(t, err, string(out))
			for _, w := range tc.want {
				require.Contains(t, string(out), w)
			}
		})
	}
}
