package fakehost

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// TestTreeRewrite: WriteFile and Truncate change the tree's read-only kernel
// files for whoever owns the tree (not only for root, whose permission bypass
// os.WriteFile relies on) and keep the mode; a new file is created read-only;
// a directory is refused.
func TestTreeRewrite(t *testing.T) {
	tr := build(t, P800XRE5(), WithoutMknod())
	fi, err := os.Stat(tr.Path("/proc/devices"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o444), fi.Mode().Perm(), "Build writes kernel files read-only")

	require.NoError(t, tr.WriteFile("/proc/devices", []byte("Character devices:\n195 kunlun\n")))
	require.Equal(t, "Character devices:\n195 kunlun\n", readTree(t, tr, "/proc/devices"))
	fi, err = os.Stat(tr.Path("/proc/devices"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o444), fi.Mode().Perm())

	require.NoError(t, tr.Truncate("/proc/devices", 1<<20))
	fi, err = os.Stat(tr.Path("/proc/devices"))
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), fi.Size())
	require.Equal(t, os.FileMode(0o444), fi.Mode().Perm())

	require.NoError(t, tr.WriteFile("/proc/new", []byte("x")))
	fi, err = os.Stat(tr.Path("/proc/new"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o444), fi.Mode().Perm())

	require.ErrorIs(t, tr.WriteFile("/proc", nil), fdio.ErrNotRegular)
}
