package hook

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// TestImageOdditiesWarnAndSkip: every layout of the image that keeps the
// hook from making a change is a warning, that change is skipped, the rest
// is done, and nothing outside the root changes (skipImageShaped).
func TestImageOdditiesWarnAndSkip(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libxpurt.so.1.0")
	buildLib(t, lib, "libxpurt.so.1")
	const folder = "/usr/lib/xpu"
	glibc := func(t *testing.T, root string) {
		copyFile(t, lib, filepath.Join(root, "lib64/ld-linux-x86-64.so.2"))
		copyFile(t, lib, filepath.Join(root, folder, "libxpurt.so.1"))
		require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	}
	cachePath := func(root string) string { return filepath.Join(root, "etc", cacheName) }
	ours := func(t *testing.T, root string) {
		require.Equal(t, []string{"libxpurt.so.1=" + folder + "/libxpurt.so.1"}, names(readCache(t, cachePath(root))))
	}
	var mounted string                  // the host directory of the bind-mount case
	var mountedBefore map[string]string // and its snapshot
	tests := []struct {
		description string
		setup       func(t *testing.T, root string)
		links       []Link
		wantWarn    string
		check       func(t *testing.T, root string)
	}{
		{
			description: "ld.so.cache is a directory",
			setup: func(t *testing.T, root string) {
				glibc(t, root)
				require.NoError(t, os.Mkdir(cachePath(root), 0o755))
			},
			wantWarn: "/etc/ld.so.cache: skipped",
			check: func(t *testing.T, root string) {
				require.DirExists(t, cachePath(root))
				require.FileExists(t, filepath.Join(root, "etc/ld.so.conf.d", ConfName), "the conf file is still written")
			},
		},
		{
			description: "the conf file is a directory",
			setup: func(t *testing.T, root string) {
				glibc(t, root)
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc/ld.so.conf.d", ConfName), 0o755))
			},
			wantWarn: ConfName + ": skipped",
			check:    ours,
		},
		{
			description: "ld.so.conf.d is a file",
			setup: func(t *testing.T, root string) {
				glibc(t, root)
				require.NoError(t, os.WriteFile(filepath.Join(root, "etc/ld.so.conf.d"), nil, 0o644))
			},
			wantWarn: ConfName + ": skipped",
			check:    ours,
		},
		{
			description: "/etc is a magic link",
			setup: func(t *testing.T, root string) {
				glibc(t, root)
				require.NoError(t, os.Remove(filepath.Join(root, "etc")))
				require.NoError(t, os.Symlink("/proc/self/root/etc", filepath.Join(root, "etc")))
				// The runtime has mounted the container's /proc when
				// createContainer hooks run.
				testreq.Root(t, "bind mounts")
				require.NoError(t, os.Mkdir(filepath.Join(root, "proc"), 0o755))
				require.NoError(t, unix.Mount("proc", filepath.Join(root, "proc"), "proc", 0, ""))
				t.Cleanup(func() { _ = unix.Unmount(filepath.Join(root, "proc"), unix.MNT_DETACH) })
			},
			wantWarn: "/etc: skipped",
		},
		{
			description: "the library folder dangles",
			setup: func(t *testing.T, root string) {
				glibc(t, root)
				require.NoError(t, os.RemoveAll(filepath.Join(root, folder)))
				require.NoError(t, os.Symlink("/nowhere", filepath.Join(root, folder)))
			},
			links:    []Link{{Target: "libxpurt.so.1", Link: folder + "/libxpurt.so"}},
			wantWarn: "create-symlinks: skipped",
			check: func(t *testing.T, root string) {
				require.NoFileExists(t, cachePath(root), "no libraries, no cache")
				require.NoDirExists(t, filepath.Join(root, "nowhere"))
			},
		},
		{
			description: "/etc leads into a writable bind mount of a host directory",
			setup: func(t *testing.T, root string) {
				testreq.Root(t, "bind mounts")
				glibc(t, root)
				mounted = t.TempDir()
				require.NoError(t, os.MkdirAll(filepath.Join(mounted, "ld.so.conf.d"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(mounted, "ld.so.cache"), []byte("host"), 0o644))
				vol := filepath.Join(root, "vol")
				require.NoError(t, os.Mkdir(vol, 0o755))
				require.NoError(t, unix.Mount(mounted, vol, "", unix.MS_BIND, ""))
				t.Cleanup(func() { _ = unix.Unmount(vol, unix.MNT_DETACH) })
				require.NoError(t, os.RemoveAll(filepath.Join(root, "etc")))
				require.NoError(t, os.Symlink("/vol", filepath.Join(root, "etc")))
				mountedBefore = snapshot(t, mounted)
			},
			links:    []Link{{Target: "x", Link: "/etc/ld.so.conf.d/x"}, {Target: "y", Link: "/etc/new/y"}},
			wantWarn: "crosses a mount point",
			check: func(t *testing.T, _ string) {
				require.Equal(t, mountedBefore, snapshot(t, mounted), "the host directory is unchanged")
			},
		},
		{
			description: "the musl path file is a FIFO",
			setup: func(t *testing.T, root string) {
				copyFile(t, lib, filepath.Join(root, "lib/ld-musl-x86_64.so.1"))
				copyFile(t, lib, filepath.Join(root, folder, "libxpurt.so.1"))
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
				require.NoError(t, unix.Mkfifo(filepath.Join(root, "etc/ld-musl-x86_64.path"), 0o644))
			},
			wantWarn: "ld-musl-x86_64.path: skipped",
		},
		{
			description: "the musl path file is larger than the hook reads",
			setup: func(t *testing.T, root string) {
				copyFile(t, lib, filepath.Join(root, "lib/ld-musl-x86_64.so.1"))
				copyFile(t, lib, filepath.Join(root, folder, "libxpurt.so.1"))
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
				p := filepath.Join(root, "etc/ld-musl-x86_64.path")
				require.NoError(t, os.WriteFile(p, nil, 0o644))
				require.NoError(t, os.Truncate(p, maxPathFile+1))
			},
			wantWarn: "file too large",
			check: func(t *testing.T, root string) {
				fi, err := os.Stat(filepath.Join(root, "etc/ld-musl-x86_64.path"))
				require.NoError(t, err)
				require.Equal(t, int64(maxPathFile+1), fi.Size(), "left as it was")
			},
		},
		{
			description: "ld.so.cache is a FIFO",
			setup: func(t *testing.T, root string) {
				glibc(t, root)
				require.NoError(t, unix.Mkfifo(cachePath(root), 0o644))
			},
			wantWarn: "not a regular file",
		},
		{
			description: "ld.so.cache is larger than MaxCacheSize",
			setup: func(t *testing.T, root string) {
				glibc(t, root)
				require.NoError(t, os.WriteFile(cachePath(root), nil, 0o644))
				require.NoError(t, os.Truncate(cachePath(root), MaxCacheSize+1))
			},
			wantWarn: "more than the",
			check:    ours,
		},
		{
			description: "ld.so.cache declares more entries than MaxKeptEntries and ours",
			setup: func(t *testing.T, root string) {
				glibc(t, root)
				require.NoError(t, os.WriteFile(cachePath(root), craftedCache(t, MaxKeptEntries+2, 8), 0o644))
			},
			wantWarn: "too many entries",
			check:    ours,
		},
		{
			description: "ld.so.cache has more than MaxKeptEntries entries besides ours",
			setup: func(t *testing.T, root string) {
				glibc(t, root)
				require.NoError(t, os.WriteFile(cachePath(root), craftedCache(t, MaxKeptEntries+1, 8), 0o644))
			},
			wantWarn: "entries besides ours",
			check:    ours,
		},
		{
			description: "ld.so.cache names more than MaxKeptBytes",
			setup: func(t *testing.T, root string) {
				glibc(t, root)
				require.NoError(t, os.WriteFile(cachePath(root), craftedCache(t, 600, 4000), 0o644))
			},
			wantWarn: "bytes of libraries",
			check:    ours,
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			root := t.TempDir()
			tc.setup(t, root)
			log := &logtest.Recorder{}
			done := make(chan error, 1)
			go func() {
				r := openRoot(t, root)
				err := UpdateLDCache(r, []string{folder}, Options{Log: log})
				if err == nil && tc.links != nil {
					err = CreateSymlinks(r, tc.links, Options{Log: log})
				}
				done <- err
			}()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(20 * time.Second):
				t.Fatal("the hook hangs")
			}
			require.Contains(t, log.Warnings(), tc.wantWarn)
			if tc.check != nil {
				tc.check(t, root)
			}
		})
	}
}

// craftedCache is a new-format ld.so.cache of n entries whose names and
// paths are distinct strings of about strLen bytes.
func craftedCache(t testing.TB, n, strLen int) []byte {
	t.Helper()
	entries := make([]ldcache.Entry, n)
	pad := strings.Repeat("x", strLen)
	for i := range entries {
		name := "lib" + pad[:max(0, strLen-20)] + "-" + itoa(i) + ".so"
		entries[i] = ldcache.Entry{Name: name, Path: "/l/" + name, Flags: 0x303}
	}
	data, err := ldcache.Encode(entries)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(data, []byte("glibc-ld.so.cache1.1")))
	require.Equal(t, uint32(n), binary.NativeEndian.Uint32(data[20:24]))
	return data
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		if i /= 10; i == 0 {
			return string(b[n:])
		}
	}
}

// TestCacheAtTheBoundsTwice: a cache of exactly MaxKeptEntries entries is
// kept whole, and again on a second run in the same root (our own entries
// do not count against the bound).
func TestCacheAtTheBoundsTwice(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libxpurt.so.1")
	buildLib(t, lib, "libxpurt.so.1")
	root := t.TempDir()
	copyFile(t, lib, filepath.Join(root, "lib64/ld-linux-x86-64.so.2"))
	copyFile(t, lib, filepath.Join(root, "usr/lib/xpu/libxpurt.so.1"))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc", cacheName), craftedCache(t, MaxKeptEntries, 8), 0o644))
	for range 2 {
		log := &logtest.Recorder{}
		require.NoError(t, UpdateLDCache(openRoot(t, root), []string{"/usr/lib/xpu"}, Options{Log: log}))
		require.Empty(t, log.Warnings())
		require.Len(t, readCache(t, filepath.Join(root, "etc", cacheName)), MaxKeptEntries+1)
	}
}
