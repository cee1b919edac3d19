package fdio

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

func TestReadFileAt(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("content"), 0o640))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink("file", link))

	for _, tc := range []struct {
		description string
		path        string
		flags       int
		limit       int64
		want        string
		wantErr     error
		wantErrno   unix.Errno
	}{
		{description: "a regular file", path: file, limit: 7, want: "content"},
		{description: "a symlink is followed without O_NOFOLLOW", path: link, limit: 7, want: "content"},
		{description: "a symlink is refused with O_NOFOLLOW", path: link, flags: unix.O_NOFOLLOW, limit: 7, wantErrno: unix.ELOOP},
		{description: "a FIFO is refused without blocking", path: fifo, limit: 7, wantErr: ErrNotRegular},
		{description: "a directory is refused", path: dir, limit: 7, wantErr: ErrNotRegular},
		{description: "a file over the limit is refused", path: file, limit: 6, wantErr: ErrTooLarge},
		{description: "a missing file", path: filepath.Join(dir, "missing"), limit: 7, wantErrno: unix.ENOENT},
	} {
		t.Run(tc.description, func(t *testing.T) {
			data, mode, err := ReadFileAt(unix.AT_FDCWD, tc.path, tc.path, tc.flags, tc.limit)
			switch {
			case tc.wantErr != nil:
				require.ErrorIs(t, err, tc.wantErr)
				require.Contains(t, err.Error(), tc.path)
			case tc.wantErrno != 0:
				require.ErrorIs(t, err, tc.wantErrno)
				require.Contains(t, err.Error(), tc.path)
			default:
				require.NoError(t, err)
				require.Equal(t, tc.want, string(data))
				require.Equal(t, os.FileMode(0o640), mode)
			}
		})
	}
}

func TestReadFullAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(path, []byte("0123456789"), 0o600))
	fd, st, err := OpenRegularAt(unix.AT_FDCWD, path, path, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.Equal(t, int64(10), st.Size)

	b := make([]byte, 4)
	n, err := ReadFullAt(fd, path, b, 3)
	require.NoError(t, err)
	require.Equal(t, "3456", string(b[:n]))

	n, err = ReadFullAt(fd, path, b, 8)
	require.ErrorIs(t, err, io.EOF, "fewer bytes only with an error")
	require.Equal(t, "89", string(b[:n]))

	_, err = ReadFullAt(-1, path, b, 0)
	require.ErrorIs(t, err, unix.EBADF)
	require.Contains(t, err.Error(), path)
}

// TestKernelFilesRefused: Open and ReadFileAt refuse regular files of
// procfs and sysfs before reading (OpenRegularAt, discovery's reader, takes
// them); an ordinary file passes.
func TestKernelFilesRefused(t *testing.T) {
	for _, path := range []string{"/proc/self/status", "/proc/kmsg", "/sys/kernel/uevent_seqnum"} {
		t.Run(path, func(t *testing.T) {
			if _, err := os.Lstat(path); err != nil {
				testreq.Missing(t, "%s: %v", path, err)
			}
			if path == "/proc/kmsg" {
				// A read of it blocks: a check after reading would hang.
				testreq.Root(t, "/proc/kmsg opens for root only")
			}
			_, _, err := ReadFileAt(unix.AT_FDCWD, path, path, 0, 1<<20)
			require.ErrorIs(t, err, ErrKernelFS)
			require.ErrorContains(t, err, path)
			_, err = Open(unix.AT_FDCWD, path, path, 0)
			require.ErrorIs(t, err, ErrKernelFS)
		})
	}
	fd, _, err := OpenRegularAt(unix.AT_FDCWD, "/proc/self/status", "/proc/self/status", 0)
	require.NoError(t, err, "discovery reads procfs")
	require.ErrorContains(t, CheckOrdinaryFS(fd, "/proc/self/status"), "(procfs)")
	require.NoError(t, unix.Close(fd))
	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	_, _, err = ReadFileAt(unix.AT_FDCWD, file, file, 0, 1)
	require.NoError(t, err)
}
