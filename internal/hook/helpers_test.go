package hook

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
	"github.com/xpu-cdi/xpu-cdi/internal/testenv"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// buildLib compiles a shared library with SONAME soname to out.
func buildLib(t testing.TB, out, soname string) {
	t.Helper()
	require.NoError(t, testenv.BuildSharedLibrary(testreq.Tool(t, "gcc"), out, soname, "int xpu_answer(void) { return 42; }\n"))
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.WriteFile(dst, data, 0o755))
}

// snapshot describes every entry under dir (testenv.Snapshot).
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	s, err := testenv.Snapshot(dir)
	require.NoError(t, err)
	return s
}

// hostTree builds a directory standing for the host: an /etc with a cache,
// an ld.so.conf.d, and a library directory.
func hostTree(t testing.TB, lib string) string {
	t.Helper()
	host := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(host, "etc/ld.so.conf.d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(host, "etc/ld.so.conf.d/host.conf"), []byte("/host/lib\n"), 0o644))
	data, err := ldcache.Encode([]ldcache.Entry{{Name: "libhost.so.1", Path: "/host/lib/libhost.so.1", Flags: 0x303}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(host, "etc/ld.so.cache"), data, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(host, "etc/ld-musl-x86_64.path"), []byte("/lib\n"), 0o644))
	copyFile(t, lib, filepath.Join(host, "libs/libxpurt.so.1"))
	return host
}

func openRoot(t testing.TB, dir string) *rootfs.Root {
	t.Helper()
	r, err := rootfs.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func readCache(t testing.TB, p string) []ldcache.Entry {
	t.Helper()
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	entries, err := ldcache.Parse(data)
	require.NoError(t, err)
	return entries
}

func names(es []ldcache.Entry) []string {
	var n []string
	for _, e := range es {
		n = append(n, e.Name+"="+e.Path)
	}
	return n
}
