package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSnapshotSeesEveryChange(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("a"), 0o644))
	require.NoError(t, os.Symlink("f", filepath.Join(dir, "l")))
	before, err := Snapshot(dir)
	require.NoError(t, err)
	require.Len(t, before, 3)

	for _, change := range []func(){
		func() { require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("b"), 0o644)) },
		func() { require.NoError(t, os.Chmod(filepath.Join(dir, "f"), 0o600)) },
		func() {
			require.NoError(t, os.Remove(filepath.Join(dir, "l")))
			require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "l")))
		},
		func() { require.NoError(t, os.Mkdir(filepath.Join(dir, "new"), 0o755)) },
	} {
		change()
		after, err := Snapshot(dir)
		require.NoError(t, err)
		require.NotEqual(t, before, after)
		before = after
	}
	_, err = Snapshot(filepath.Join(dir, "missing"))
	require.Error(t, err)
}
