package privsock

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "xps")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// TestModeIgnoresUmask: under umask 000 the socket is still Mode, and under
// a stricter umask too.
func TestModeIgnoresUmask(t *testing.T) {
	for _, umask := range []int{0o000, 0o077, 0o777} {
		t.Run(fmt.Sprintf("umask %03o", umask), func(t *testing.T) {
			// The directory is made before the umask changes: under
			// umask 777 it would be mode 000, which only root can enter.
			path := filepath.Join(shortDir(t), "p.sock")
			old := syscall.Umask(umask)
			defer syscall.Umask(old)
			l, err := Listen(context.Background(), path)
			require.NoError(t, err)
			defer l.Close()
			fi, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(Mode), fi.Mode().Perm())
		})
	}
}

// TestListenReplacing: a stale socket is replaced and the socket is removed
// on close; a file that is not a socket is left alone, named in the error.
func TestListenReplacing(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "dra.sock")
	stale, err := Listen(context.Background(), path)
	require.NoError(t, err)
	// A listener closed without removing its node leaves a stale socket.
	stale.(interface{ SetUnlinkOnClose(bool) }).SetUnlinkOnClose(false)
	require.NoError(t, stale.Close())
	require.FileExists(t, path)

	l, err := ListenReplacing(context.Background(), path)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoFileExists(t, path)

	require.NoError(t, os.WriteFile(path, []byte("x"), 0o600))
	_, err = ListenReplacing(context.Background(), path)
	require.ErrorContains(t, err, path)
	require.FileExists(t, path)
}
