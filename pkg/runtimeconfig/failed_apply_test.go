package runtimeconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestFailedConfigureLeavesNoRecord: when the write of the main file fails
// after its revert record was written (here: the file changes between plan
// and apply), the record is taken back, and a later --revert finds nothing
// to do and changes nothing.
func TestFailedConfigureLeavesNoRecord(t *testing.T) {
	for _, engine := range []Engine{Docker, CRIO} {
		t.Run(string(engine), func(t *testing.T) {
			root := t.TempDir()
			opts := rootedPaths(engine, root)
			rel := DefaultDockerConfig
			content := "{\n    \"log-level\":   \"warn\"\n}\n"
			if engine == CRIO {
				opts = append(opts, WithoutDropIn())
				rel, content = DefaultCRIOConfig, "[crio.runtime]\n  # a comment\n  log_level = 'info'\n"
			}
			writeFiles(t, root, files{rel: content})
			c, err := New(engine, opts...)
			require.NoError(t, err)
			p, err := c.Configure()
			require.NoError(t, err)
			// Someone edits the file between plan and apply.
			edited := content + "\n"
			writeFiles(t, root, files{rel: edited})
			before := snapshot(t, root)
			err = p.Apply()
			require.ErrorIs(t, err, ErrConcurrentEdit)
			require.Equal(t, before, snapshot(t, root), "the record written first is taken back")

			rev, err := c.Revert()
			require.NoError(t, err)
			require.NoError(t, rev.Apply())
			require.Equal(t, before, snapshot(t, root))
		})
	}
}

// TestRevertNeverRewritesAnUnchangedFile: a revert record whose edits the
// file does not hold (a configure killed between its two writes) only
// removes the record; the file keeps its bytes and its inode.
func TestRevertNeverRewritesAnUnchangedFile(t *testing.T) {
	root := t.TempDir()
	rel := DefaultDockerConfig
	content := "{\"log-level\":\"warn\",   \"x\": [1,2]}\n"
	writeFiles(t, root, files{rel: content})
	c, err := New(Docker, rootedPaths(Docker, root)...)
	require.NoError(t, err)
	p, err := c.Configure()
	require.NoError(t, err)
	require.Len(t, p.Changes, 2)
	require.Equal(t, filepath.Join(root, rel)+recordSuffix, p.Changes[0].Path, "the record goes first")
	require.NoError(t, p.Changes[0].apply()) // killed before the second write

	var st unix.Stat_t
	require.NoError(t, unix.Stat(filepath.Join(root, rel), &st))
	rev, err := c.Revert()
	require.NoError(t, err)
	require.NoError(t, rev.Apply())
	data, err := os.ReadFile(filepath.Join(root, rel))
	require.NoError(t, err)
	require.Equal(t, content, string(data))
	var after unix.Stat_t
	require.NoError(t, unix.Stat(filepath.Join(root, rel), &after))
	require.Equal(t, st.Ino, after.Ino, "the file was not rewritten")
	require.NoFileExists(t, filepath.Join(root, rel)+recordSuffix)
}
