package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/testenv"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// bindMount bind-mounts src on dst until the test ends.
func bindMount(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o755))
	require.NoError(t, unix.Mount(src, dst, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(dst, unix.MNT_DETACH) })
}

// TestWriteDirsStayOnTheRootMount: a directory opened for writing (or made
// by MkdirAll) never lies on a bind mount in the root, however the image's
// symlinks lead there, with openat2 and with the fallback; reading through
// the mount stays allowed.
func TestWriteDirsStayOnTheRootMount(t *testing.T) {
	testreq.Root(t, "bind mounts")
	host := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(host, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(host, "precious"), []byte("host\n"), 0o644))
	dir := t.TempDir()
	bindMount(t, host, filepath.Join(dir, "vol"))
	require.NoError(t, os.Symlink("/vol", filepath.Join(dir, "etc")))
	require.NoError(t, os.Symlink("vol/sub", filepath.Join(dir, "lib")))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "usr"), 0o755))
	require.NoError(t, os.Symlink("../vol/new", filepath.Join(dir, "usr", "lib")))
	before, err := testenv.Snapshot(host)
	require.NoError(t, err)

	for _, fallback := range []bool{false, true} {
		r, err := Open(dir)
		require.NoError(t, err)
		r.fallback = fallback
		for _, p := range []string{"/etc", "/lib", "/vol", "/vol/sub", "etc/../vol/sub"} {
			_, err := r.OpenDirForWrite(p)
			require.ErrorIs(t, err, ErrCrossesMount, "fallback=%v %s", fallback, p)
			require.ErrorIs(t, err, unix.EXDEV, "fallback=%v %s", fallback, p)
		}
		for _, p := range []string{"/etc/a/b", "/lib/x", "/vol/y"} {
			_, err := r.MkdirAll(p, 0o755)
			require.ErrorIs(t, err, ErrCrossesMount, "fallback=%v %s", fallback, p)
		}
		// A symlink to a missing directory in the mount: openat2 stops at
		// the mount (EXDEV), the fallback finds nothing to open (ENOENT);
		// neither creates it.
		_, err = r.MkdirAll("/usr/lib/z", 0o755)
		require.Error(t, err)
		require.True(t, errors.Is(err, ErrCrossesMount) || errors.Is(err, unix.ENOENT), "fallback=%v: %v", fallback, err)
		data, err := r.ReadFile("/etc/precious", 1<<10)
		require.NoError(t, err, "reading through a mount stays allowed")
		require.Equal(t, "host\n", string(data))

		d, err := r.MkdirAll("/usr/local/xpu/lib64", 0o755)
		require.NoError(t, err, "fallback=%v", fallback)
		require.NoError(t, d.Close())
		d, err = r.OpenDirForWrite("/usr/local/../local/xpu")
		require.NoError(t, err)
		require.NoError(t, d.Close())
		require.NoError(t, r.Close())
	}
	after, err := testenv.Snapshot(host)
	require.NoError(t, err)
	require.Equal(t, before, after, "the mounted host directory is unchanged")
}

// TestMkdirAllDanglingSymlink: a symlink that leads nowhere in the root is
// not followed to create its target.
func TestMkdirAllDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Symlink("/nowhere/lib64", filepath.Join(dir, "lib64")))
	for _, fallback := range []bool{false, true} {
		r, err := Open(dir)
		require.NoError(t, err)
		r.fallback = fallback
		_, err = r.MkdirAll("/lib64/sub", 0o755)
		require.ErrorIs(t, err, unix.ENOENT, "fallback=%v", fallback)
		require.NoDirExists(t, filepath.Join(dir, "nowhere"))
		require.NoError(t, r.Close())
	}
}

// TestMountIDSources: the fdinfo fallback gives the same mount ID as statx,
// and different IDs for different mounts.
func TestMountIDSources(t *testing.T) {
	testreq.Root(t, "bind mounts")
	dir := t.TempDir()
	bindMount(t, t.TempDir(), filepath.Join(dir, "vol"))
	ids := map[uint64]bool{}
	for _, p := range []string{dir, filepath.Join(dir, "vol")} {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		a, err := mountID(fd)
		require.NoError(t, err)
		b, err := mountIDFromFdinfo(fd)
		require.NoError(t, err)
		require.NoError(t, unix.Close(fd))
		require.Equal(t, a, b, p)
		ids[a] = true
	}
	require.Len(t, ids, 2)
}

// TestKernelFilesRefusedInTheRoot: a link of the image into the container's
// procfs (mounted when the hook runs) reaches /proc/kmsg, a regular file:
// OpenRegular refuses it without reading, so the host's kernel log keeps
// its messages.
func TestKernelFilesRefusedInTheRoot(t *testing.T) {
	testreq.Root(t, "a procfs mount")
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "proc"), 0o755))
	require.NoError(t, unix.Mount("proc", filepath.Join(dir, "proc"), "proc", 0, ""))
	t.Cleanup(func() { _ = unix.Unmount(filepath.Join(dir, "proc"), unix.MNT_DETACH) })
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "lib"), 0o755))
	require.NoError(t, os.Symlink("/proc/kmsg", filepath.Join(dir, "lib", "libk0.so")))
	require.NoError(t, os.Symlink("../proc/self/status", filepath.Join(dir, "lib", "libk1.so")))
	for _, fallback := range []bool{false, true} {
		r, err := Open(dir)
		require.NoError(t, err)
		r.fallback = fallback
		for _, p := range []string{"/lib/libk0.so", "/lib/libk1.so", "/proc/kmsg"} {
			_, err := r.OpenRegular(p)
			require.ErrorIs(t, err, ErrKernelFS, "fallback=%v %s", fallback, p)
			_, err = r.ReadFile(p, 1<<20)
			require.ErrorIs(t, err, ErrKernelFS, "fallback=%v %s", fallback, p)
		}
		require.NoError(t, r.Close())
	}
}
