package partition

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// lockTree makes root/run/xpu-cdi/partition.lock with content, private to
// the caller as the writer makes it, and returns the lock's path.
func lockTree(t *testing.T, content string) (root, path string) {
	t.Helper()
	root = t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, LockDir), 0o700))
	path = filepath.Join(root, LockDir, LockFile)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return root, path
}

// hold takes the lock as a writer does, for the rest of the test.
func hold(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB))
	t.Cleanup(func() { _ = f.Close() })
}

// The cards a writer lays out are listed only while it holds the lock, and
// only from a lock the caller owns that no one else may open: a list
// another user could write would let that user hide the cards from the
// device plugin and the DRA driver. What is refused lists nothing.
func TestLayingOut(t *testing.T) {
	const card = "0000:03:00.0"
	t.Run("held", func(t *testing.T) {
		root, path := lockTree(t, card+"\n0000:83:00.0\n")
		hold(t, path)
		got, err := LayingOut(root)
		require.NoError(t, err)
		require.Equal(t, []string{card, "0000:83:00.0"}, got)
	})
	t.Run("no lock, no list", func(t *testing.T) {
		got, err := LayingOut(t.TempDir())
		require.NoError(t, err)
		require.Empty(t, got)
	})
	t.Run("a list left by a writer that died", func(t *testing.T) {
		root, _ := lockTree(t, card+"\n")
		got, err := LayingOut(root)
		require.NoError(t, err)
		require.Empty(t, got, "the lock is not held: its list is stale")
	})
	t.Run("not a PCI address", func(t *testing.T) {
		root, path := lockTree(t, "0000:03:00.0\n../../etc\x1b[2J\n")
		hold(t, path)
		_, err := LayingOut(root)
		require.ErrorContains(t, err, `lists "../../etc\\x1b[2J", not a PCI address`)
	})
	type spoiled struct {
		name, want string
		spoil      func(t *testing.T, root, path string)
	}
	cases := []spoiled{
		{"a directory others may search", "xpu-cdi is mode 0755, open to other users", func(t *testing.T, root, _ string) {
			require.NoError(t, os.Chmod(filepath.Join(root, LockDir), 0o755))
		}},
		{"a file others may write", "partition.lock is mode 0666, open to other users", func(t *testing.T, _, path string) {
			require.NoError(t, os.Chmod(path, 0o666))
		}},
		{"a link for the directory", "xpu-cdi is not a directory (a link is not followed)", func(t *testing.T, root, _ string) {
			dir := filepath.Join(root, LockDir)
			require.NoError(t, os.Rename(dir, dir+".real"))
			require.NoError(t, os.Symlink(dir+".real", dir))
		}},
		{"a run others may write", "run is owned by uid", func(t *testing.T, root, _ string) {
			require.NoError(t, os.Chmod(filepath.Join(root, "run"), 0o777))
		}},
		{"a hard link", "not a regular file with one link", func(t *testing.T, root, path string) {
			require.NoError(t, os.Link(path, filepath.Join(root, LockDir, "other")))
		}},
	}
	if os.Geteuid() == 0 {
		cases = append(cases, spoiled{"another user's file", "partition.lock is owned by uid 65534, not by this process's uid 0", func(t *testing.T, _, path string) {
			require.NoError(t, os.Chown(path, 65534, 65534))
		}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root, path := lockTree(t, card+"\n")
			hold(t, path)
			tc.spoil(t, root, path)
			got, err := LayingOut(root)
			require.ErrorIs(t, err, ErrUnsafeLock)
			require.ErrorContains(t, err, tc.want)
			require.Empty(t, got)
		})
	}
}
