package labels

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio/fdiotest"
)

// TestWriteFileHostileOldFile: a FIFO at the feature file's path, or a
// link there to /dev/zero, is an error naming the file at once (before,
// reading the old file blocked on the FIFO, and read /dev/zero until the
// memory ran out), and it is left as it was.
func TestWriteFileHostileOldFile(t *testing.T) {
	for _, tc := range fdiotest.HostileFiles() {
		t.Run(tc.Description, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "xpu-cdi")
			require.NoError(t, tc.Plant(path))
			before, err := os.Lstat(path)
			require.NoError(t, err)
			err = fdiotest.Within(t, "WriteFile", func() error {
				_, err := WriteFile(path, []Label{{Present, "true"}}, "test")
				return err
			})
			require.ErrorIs(t, err, fdio.ErrNotRegular)
			require.ErrorContains(t, err, "reading feature file "+path)
			after, err := os.Lstat(path)
			require.NoError(t, err)
			require.Equal(t, before.Mode(), after.Mode(), "left as it was")
		})
	}
}
