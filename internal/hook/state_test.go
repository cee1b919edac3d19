package hook

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// TestRootPathBadConfig: the bundle's config.json is read without blocking
// (a FIFO fails at once), bounded, and its root.path is resolved against the
// bundle.
func TestRootPathBadConfig(t *testing.T) {
	bundle := t.TempDir()
	cfg := filepath.Join(bundle, "config.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"root":{"path":"rootfs"}}`), 0o600))
	got, err := RootPath(&specs.State{Bundle: bundle})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(bundle, "rootfs"), got)

	require.NoError(t, os.Remove(cfg))
	require.NoError(t, unix.Mkfifo(cfg, 0o600))
	start := time.Now()
	_, err = RootPath(&specs.State{Bundle: bundle})
	require.ErrorIs(t, err, fdio.ErrNotRegular)
	require.Less(t, time.Since(start), 5*time.Second)

	require.NoError(t, os.Remove(cfg))
	require.NoError(t, os.WriteFile(cfg, make([]byte, maxStateSize+1), 0o600))
	_, err = RootPath(&specs.State{Bundle: bundle})
	require.ErrorIs(t, err, fdio.ErrTooLarge)
}
