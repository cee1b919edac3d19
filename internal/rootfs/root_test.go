package rootfs

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

func TestRoot(t *testing.T) {
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("host"), 0o600))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "secret"), []byte("image"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "abs")))
	require.NoError(t, os.Symlink("../../../../../../../secret", filepath.Join(dir, "rel")))
	require.NoError(t, unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "out")))

	r, err := Open(dir)
	require.NoError(t, err)
	defer r.Close()

	data, err := r.ReadFile("rel", 1<<10)
	require.NoError(t, err)
	require.Equal(t, "image", string(data), ".. is clamped at the root")
	_, err = r.ReadFile("abs", 1<<10)
	require.ErrorIs(t, err, unix.ENOENT, "absolute symlinks resolve inside the root")
	_, err = r.OpenFile("/fifo")
	require.ErrorIs(t, err, fdio.ErrNotRegular)
	_, err = r.ReadFile("/secret", 2)
	require.ErrorContains(t, err, "more than the 2 allowed")
	_, err = r.OpenRegular("/fifo")
	require.ErrorIs(t, err, fdio.ErrNotRegular)
	_, err = r.OpenRegular("abs")
	require.ErrorIs(t, err, unix.ENOENT)

	f, err := r.OpenRegular("rel")
	require.NoError(t, err)
	require.Equal(t, int64(5), f.Size())
	require.Equal(t, filepath.Join(dir, "rel"), f.Name())
	buf := make([]byte, 3)
	n, err := f.ReadAt(buf, 2)
	require.NoError(t, err)
	require.Equal(t, "age", string(buf[:n]))
	n, err = f.ReadAt(buf, 4)
	require.ErrorIs(t, err, io.EOF, "a read past the end is short, with io.EOF")
	require.Equal(t, "e", string(buf[:n]))
	require.NoError(t, f.Close())

	d, err := r.OpenDir("/")
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, WriteFileAtomic(d, "out", []byte("new"), 0o644))
	fi, err := os.Lstat(filepath.Join(dir, "out"))
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular(), "the symlink is replaced, not followed")
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing created outside")
	require.Error(t, WriteFileAtomic(d, "../x", nil, 0o644))

	sub, err := r.MkdirAll("/out2/a/b", 0o755)
	require.NoError(t, err)
	_ = sub.Close()
	require.DirExists(t, filepath.Join(dir, "out2/a/b"))
}
