package hook

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// realisticRoot lays out a glibc image: the host's ld.so.cache (a few
// hundred entries) and a folder holding n XPU-like libraries with SONAME
// links.
func realisticRoot(b *testing.B, n int) string {
	b.Helper()
	hostCache, err := os.ReadFile("/etc/ld.so.cache")
	if err != nil {
		testreq.Missing(b, "no host ld.so.cache: %v", err)
	}
	root := b.TempDir()
	lib := filepath.Join(b.TempDir(), "lib.so")
	buildLib(b, lib, "libxpu0.so.1")
	copyFile(b, lib, filepath.Join(root, "lib64/ld-linux-x86-64.so.2"))
	require.NoError(b, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(root, "etc/ld.so.cache"), hostCache, 0o644))
	for i := range n {
		// Same code, distinct SONAMEs via distinct builds would be slow;
		// the SONAME is what Scan reads, so build each.
		name := fmt.Sprintf("libxpu%d.so.1", i)
		buildLib(b, filepath.Join(root, "usr/lib/xpu", name+".2.3"), name)
		require.NoError(b, os.Symlink(name+".2.3", filepath.Join(root, "usr/lib/xpu", name)))
	}
	return root
}

func BenchmarkUpdateLDCache(b *testing.B) {
	root := realisticRoot(b, 6)
	orig, err := os.ReadFile(filepath.Join(root, "etc/ld.so.cache"))
	require.NoError(b, err)
	r := openRoot(b, root)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		require.NoError(b, os.WriteFile(filepath.Join(root, "etc/ld.so.cache"), orig, 0o644))
		b.StartTimer()
		require.NoError(b, UpdateLDCache(r, []string{"/usr/lib/xpu"}, Options{}))
	}
}

func BenchmarkUpdateLDCacheUnchanged(b *testing.B) {
	root := realisticRoot(b, 6)
	r := openRoot(b, root)
	require.NoError(b, UpdateLDCache(r, []string{"/usr/lib/xpu"}, Options{}))
	b.ResetTimer()
	for b.Loop() {
		require.NoError(b, UpdateLDCache(r, []string{"/usr/lib/xpu"}, Options{}))
	}
}

func BenchmarkCreateSymlinks(b *testing.B) {
	root := b.TempDir()
	links := []Link{
		{"libxpurt.so.1", "/usr/lib/xpu/libxpurt.so"},
		{"libxpuml.so.1", "/usr/lib/xpu/libxpuml.so"},
		{"xpu_smi", "/usr/bin/xpu-smi"},
		{"libcuda_shim.so.1", "/usr/lib/xpu/libcuda_shim.so"},
	}
	r := openRoot(b, root)
	for b.Loop() {
		b.StopTimer()
		for _, l := range links {
			_ = os.Remove(filepath.Join(root, l.Link))
		}
		b.StartTimer()
		require.NoError(b, CreateSymlinks(r, links, Options{}))
	}
}
