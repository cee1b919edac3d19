package deviceplugin

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSocketModeIgnoresUmask: under umask 000 the socket is still
// SocketMode, and under a stricter umask too.
func TestSocketModeIgnoresUmask(t *testing.T) {
	for _, umask := range []int{0o000, 0o077, 0o777} {
		t.Run(fmt.Sprintf("umask %03o", umask), func(t *testing.T) {
			// The directory first: under umask 777 it would be 0000, which
			// only root may create a socket in.
			path := filepath.Join(shortDir(t), "p.sock")
			old := syscall.Umask(umask)
			defer syscall.Umask(old)
			l, err := listenPrivate(path)
			require.NoError(t, err)
			defer l.Close()
			fi, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(SocketMode), fi.Mode().Perm())
		})
	}
}
