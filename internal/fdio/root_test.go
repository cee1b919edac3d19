package fdio

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// A dev root whose directories are symlinks leading out of it: every open
// resolves them inside the root, with openat2 and with the fallback.
func TestRootResolvesDirectoriesInside(t *testing.T) {
	top := t.TempDir()
	root := filepath.Join(top, "a", "root")
	outside := filepath.Join(top, "a", "elsewhere")
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "version"), []byte("SECRET\n"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "proc"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sys", "module"), 0o755))
	require.NoError(t, os.Symlink("../../elsewhere", filepath.Join(root, "proc", "xpu")))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "sys", "module", "kunlun")))
	// In the root: a link that stays inside is followed.
	require.NoError(t, os.MkdirAll(filepath.Join(root, "real"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "real", "version"), []byte("4.33.0\n"), 0o644))
	require.NoError(t, os.Symlink("/real", filepath.Join(root, "inside")))
	// Sanity: a plain open of the joined path reaches the outside file.
	data, err := os.ReadFile(filepath.Join(root, "proc", "xpu", "version"))
	require.NoError(t, err)
	require.Equal(t, "SECRET\n", string(data))

	for _, fallback := range []bool{false, true} {
		t.Run(map[bool]string{false: "openat2", true: "pathrs-lite"}[fallback], func(t *testing.T) {
			r := NewRoot(root)
			r.fallback = fallback
			defer r.Close()
			for _, p := range []string{"/proc/xpu/version", "/sys/module/kunlun/version", "proc/../../../a/elsewhere/version"} {
				_, _, err := r.OpenRegular(p)
				require.ErrorIs(t, err, fs.ErrNotExist, p)
				var perr *os.PathError
				require.ErrorAs(t, err, &perr)
				require.Equal(t, "open", perr.Op)
				_, err = r.Stat(p)
				require.ErrorIs(t, err, fs.ErrNotExist, p)
			}
			_, err := r.ReadDir("/proc/xpu")
			require.ErrorIs(t, err, fs.ErrNotExist)

			fd, st, err := r.OpenRegular("/inside/version")
			require.NoError(t, err)
			require.Equal(t, int64(7), st.Size)
			require.NoError(t, unix.Close(fd))
			fi, err := r.Stat("/inside")
			require.NoError(t, err)
			require.True(t, fi.IsDir())
			fi, err = r.Lstat("/inside")
			require.NoError(t, err)
			require.Equal(t, fs.ModeSymlink, fi.Mode().Type())
			entries, err := r.ReadDir("/")
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			require.Equal(t, []string{"inside", "proc", "real", "sys"}, names)

			// A final symlink is refused, a FIFO is refused without blocking.
			require.NoError(t, os.Symlink("version", filepath.Join(root, "real", "link"+map[bool]string{false: "2", true: "3"}[fallback])))
			_, _, err = r.OpenRegular("/real/link" + map[bool]string{false: "2", true: "3"}[fallback])
			require.ErrorIs(t, err, unix.ELOOP)
		})
	}

	r := NewRoot(filepath.Join(top, "missing"))
	_, err = r.Stat("/proc")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.True(t, errors.Is(err, fs.ErrNotExist))
	require.NoError(t, r.Close())
}

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
