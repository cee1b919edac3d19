package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

func TestWriteFile(t *testing.T) {
	for _, tc := range []struct {
		description string
		setup       func(t *testing.T, path string)
		opts        []Option
		wantErr     string
		wantMode    os.FileMode
		wantOld     bool
	}{
		{description: "new file gets the default mode", wantMode: 0o644},
		{description: "new file with WithPerm", opts: []Option{WithPerm(0o600)}, wantMode: 0o600},
		{description: "without fsync", opts: []Option{WithoutSync()}, wantMode: 0o644},
		{
			description: "an existing file's mode is kept with WithKeepMode",
			setup:       func(t *testing.T, p string) { require.NoError(t, os.WriteFile(p, []byte("old"), 0o640)) },
			opts:        []Option{WithKeepMode()},
			wantMode:    0o640,
		},
		{
			description: "a directory is refused",
			setup:       func(t *testing.T, p string) { require.NoError(t, os.Mkdir(p, 0o755)) },
			wantErr:     "it is a directory",
		},
		{
			description: "a symlink is refused, not followed",
			setup: func(t *testing.T, p string) {
				target := filepath.Join(filepath.Dir(p), "target")
				require.NoError(t, os.WriteFile(target, []byte("old"), 0o644))
				require.NoError(t, os.Symlink(target, p))
			},
			wantErr: "it is a symlink",
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if tc.setup != nil {
				tc.setup(t, path)
			}
			err := WriteFile(path, []byte("new"), tc.opts...)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.ErrorContains(t, err, path)
				require.ErrorIs(t, err, fdio.ErrNotRegular)
				if tc.wantOld {
					data, rerr := os.ReadFile(path)
					require.NoError(t, rerr)
					require.Equal(t, "old", string(data))
				}
			} else {
				require.NoError(t, err)
				data, rerr := os.ReadFile(path)
				require.NoError(t, rerr)
				require.Equal(t, "new", string(data))
				st, serr := os.Stat(path)
				require.NoError(t, serr)
				require.Equal(t, tc.wantMode, st.Mode().Perm())
			}
			entries, rerr := os.ReadDir(dir)
			require.NoError(t, rerr)
			for _, e := range entries {
				require.NotContains(t, e.Name(), ".tmp", "temporary file left behind")
			}
		})
	}
}

func TestWriteFileMkdir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "f")
	require.Error(t, WriteFile(path, []byte("x")))
	require.NoError(t, WriteFile(path, []byte("x"), WithMkdir()))
	require.FileExists(t, path)
}

func TestWriteFileKeepsOwner(t *testing.T) {
	testreq.Root(t, "chown")
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
	require.NoError(t, os.Chown(path, 4321, 8765))
	require.NoError(t, WriteFile(path, []byte("new"), WithKeepMode()))
	st, err := os.Stat(path)
	require.NoError(t, err)
	sys := st.Sys().(*syscall.Stat_t)
	require.Equal(t, uint32(4321), sys.Uid)
	require.Equal(t, uint32(8765), sys.Gid)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
}
