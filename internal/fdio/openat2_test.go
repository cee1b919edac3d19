package fdio

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// Openat2InRoot resolves inside dirfd, passes the caller's extra RESOLVE_
// flags on, and returns a failure as the bare errno, not as ErrNoOpenat2,
// so that the callers fall back only where openat2 is missing.
func TestOpenat2InRoot(t *testing.T) {
	top := t.TempDir()
	root := filepath.Join(top, "root")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "real"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(top, "secret"), []byte("SECRET\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "real", "version"), []byte("4.33.0\n"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(top, "secret"), filepath.Join(root, "out")))
	require.NoError(t, os.Symlink("/real/version", filepath.Join(root, "in")))
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close(dir) })

	read := func(fd int) string {
		t.Helper()
		f := os.NewFile(uintptr(fd), "opened")
		defer f.Close()
		b := make([]byte, 64)
		n, err := f.Read(b)
		require.NoError(t, err)
		return string(b[:n])
	}

	fd, err := Openat2InRoot(dir, "in", unix.O_RDONLY, 0)
	if errors.Is(err, ErrNoOpenat2) {
		testreq.Missing(t, "openat2 on this kernel: %v", err)
	}
	require.NoError(t, err)
	require.Equal(t, "4.33.0\n", read(fd))

	// An absolute link is resolved inside the root, where it names nothing.
	_, err = Openat2InRoot(dir, "out", unix.O_RDONLY, 0)
	require.ErrorIs(t, err, unix.ENOENT)
	require.NotErrorIs(t, err, ErrNoOpenat2)

	// The caller's RESOLVE_ flags are added to the root's.
	_, err = Openat2InRoot(dir, "in", unix.O_RDONLY, unix.RESOLVE_NO_SYMLINKS)
	require.ErrorIs(t, err, unix.ELOOP)
	require.NotErrorIs(t, err, ErrNoOpenat2)

	// The descriptor is close-on-exec without the caller asking.
	fd, err = Openat2InRoot(dir, "real/version", unix.O_RDONLY, 0)
	require.NoError(t, err)
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	require.NoError(t, err)
	require.NotZero(t, flags&unix.FD_CLOEXEC)
	_ = unix.Close(fd)
}
