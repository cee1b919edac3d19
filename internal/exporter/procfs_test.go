package exporter

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// readResetCount reads a counter, says fs.ErrNotExist for a missing one,
// and refuses a FIFO (which would block a read) or a symlink with
// fdio.ErrNotRegular and the path, without reading it.
func TestReadResetCount(t *testing.T) {
	dir := t.TempDir()
	write := func(index, content string) string {
		d := filepath.Join(dir, "proc/xpu/dev"+index)
		require.NoError(t, os.MkdirAll(d, 0o755))
		p := filepath.Join(d, "reset_count")
		if content != "" {
			require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		}
		return p
	}
	write("0", "7\n")
	write("1", "")
	fifo := write("2", "")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	link := write("3", "")
	require.NoError(t, os.Symlink(filepath.Join(dir, "proc/xpu/dev0/reset_count"), link))
	write("4", "seven\n")

	root := fdio.NewRoot(dir)
	t.Cleanup(func() { _ = root.Close() })
	n, err := readResetCount(root, 0)
	require.NoError(t, err)
	require.Equal(t, 7.0, n)
	_, err = readResetCount(root, 1)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = readResetCount(root, 2)
	require.ErrorIs(t, err, fdio.ErrNotRegular)
	require.ErrorContains(t, err, fifo)
	_, err = readResetCount(root, 3)
	require.Error(t, err, "a symlinked counter is not followed")
	_, err = readResetCount(root, 4)
	require.ErrorContains(t, err, filepath.Join(dir, "proc/xpu/dev4/reset_count"))
}
