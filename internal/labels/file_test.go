package labels

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// TestWriteFileHostileOldFile: a FIFO at the feature file's path, or a
// link there to /dev/zero, is an error naming the file at once (before,
// reading the old file blocked on the FIFO, and read /dev/zero until the
// memory ran out), and it is left as it was.
func TestWriteFileHostileOldFile(t *testing.T) {
	for _, tc := range []struct {
		description string
		plant       func(path string) error
	}{
		{description: "a FIFO", plant: func(path string) error { return unix.Mkfifo(path, 0o644) }},
		{description: "a link to /dev/zero", plant: func(path string) error { return os.Symlink("/dev/zero", path) }},
	} {
		t.Run(tc.description, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "xpu-cdi")
			require.NoError(t, tc.plant(path))
			before, err := os.Lstat(path)
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() {
				_, err := WriteFile(path, []Label{{Present, "true"}}, "test")
				done <- err
			}()
			select {
			case err := <-done:
				require.ErrorIs(t, err, fdio.ErrNotRegular)
				require.ErrorContains(t, err, "reading feature file "+path)
			case <-time.After(10 * time.Second):
				t.Fatal("WriteFile blocks on the old file")
			}
			after, err := os.Lstat(path)
			require.NoError(t, err)
			require.Equal(t, before.Mode(), after.Mode(), "left as it was")
		})
	}
}
