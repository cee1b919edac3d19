package ldcache

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// cacheFlagsOfHost returns the flags the host's ldconfig gives libc.
func cacheFlagsOfHost(t testing.TB) int32 {
	data, err := os.ReadFile("/etc/ld.so.cache")
	require.NoError(t, err)
	entries, err := Parse(data)
	require.NoError(t, err)
	for _, e := range entries {
		if e.Name == "libc.so.6" {
			return e.Flags
		}
	}
	t.Fatal("no libc.so.6 in the host cache")
	return 0
}

var lddLine = regexp.MustCompile(`(/\S+) \(0x[0-9a-f]+\)`)

// TestLoaderUsesEncodedCache is the proof that Encode writes what glibc's
// loader reads: a program in a chroot finds its library in a non-default
// directory only through the cache we wrote.
func TestLoaderUsesEncodedCache(t *testing.T) {
	testreq.Root(t, "chroot")
	gcc := testreq.Tool(t, "gcc")
	testreq.Tool(t, "ldd")
	root := t.TempDir()
	libdir := filepath.Join(root, "opt/foo/lib")
	buildLib(t, filepath.Join(libdir, "libfoo.so.1.0"), "libfoo.so.1", "foo_message", "hello from libfoo")
	require.NoError(t, os.Symlink("libfoo.so.1.0", filepath.Join(libdir, "libfoo.so.1")))
	src := filepath.Join(t.TempDir(), "main.c")
	require.NoError(t, os.WriteFile(src, []byte(`#include <stdio.h>
const char *foo_message(void);
int main(void) { puts(foo_message()); return 0; }
`), 0o644))
	prog := filepath.Join(root, "prog")
	out, err := exec.Command(gcc, "-o", prog, src, filepath.Join(libdir, "libfoo.so.1.0")).CombinedOutput()
	require.NoError(t, err, "gcc: %s", out)

	// Copy the loader and libc (the program's other deps) into the root.
	out, err = exec.Command("ldd", prog).CombinedOutput()
	require.NoError(t, err, "ldd: %s", out)
	require.Contains(t, string(out), "libfoo.so.1 => not found")
	for _, m := range lddLine.FindAllStringSubmatch(string(out), -1) {
		data, err := os.ReadFile(m[1])
		require.NoError(t, err)
		dst := filepath.Join(root, m[1])
		require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		require.NoError(t, os.WriteFile(dst, data, 0o755))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))

	run := func() (string, error) {
		cmd := exec.Command("chroot", root, "/prog")
		cmd.Env = []string{"PATH=/"}
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	out2, err := run()
	require.Error(t, err, "without a cache the program must not find libfoo: %s", out2)
	require.Contains(t, out2, "libfoo.so.1")

	// Our entries plus every entry of the host's cache, so the loader has
	// to binary-search a realistic table to find ours.
	ours := []Entry{{Name: "libfoo.so.1", Path: "/opt/foo/lib/libfoo.so.1", Flags: cacheFlagsOfHost(t)}}
	hostData, err := os.ReadFile("/etc/ld.so.cache")
	require.NoError(t, err)
	host, err := Parse(hostData)
	require.NoError(t, err)
	var kept []Entry
	for _, e := range host {
		if e.HWCap&HWCapExtension == 0 {
			kept = append(kept, e)
		}
	}
	cache, err := Encode(append(ours, kept...))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/ld.so.cache"), cache, 0o644))
	out2, err = run()
	require.NoError(t, err, "with the cache: %s", out2)
	require.Equal(t, "hello from libfoo\n", out2)

	// The same table with its records reversed: the loader's binary search
	// no longer finds libfoo, which proves the order matters and ours is right.
	n := len(ours) + len(kept)
	reversed := make([]byte, len(cache))
	copy(reversed, cache)
	for i := range n {
		copy(reversed[newHeaderSize+i*newEntrySize:newHeaderSize+(i+1)*newEntrySize],
			cache[newHeaderSize+(n-1-i)*newEntrySize:newHeaderSize+(n-i)*newEntrySize])
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/ld.so.cache"), reversed, 0o644))
	out2, err = run()
	require.Error(t, err, "an unsorted cache must not work: %s", out2)
}
