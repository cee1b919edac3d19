package shim

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

// TestJITBoundedOnHostileHost: jit mode runs discovery at every create, so
// it inherits discovery's bounds: FIFOs in the procfs tree, at the driver
// root's ld.so.cache and behind a library link neither block a create nor
// become devices or libraries.
func TestJITBoundedOnHostileHost(t *testing.T) {
	tree, seam := fakeHost(t, fakehost.P800x8())
	for _, p := range []string{"/proc/xpu/dev3/info", "/etc/ld.so.cache"} {
		require.NoError(t, os.RemoveAll(tree.Path(p)))
		require.NoError(t, unix.Mkfifo(tree.Path(p), 0o644))
	}
	libDir := tree.Path(filepath.Dir(tree.Libraries[0].Path))
	require.NoError(t, unix.Mkfifo(filepath.Join(libDir, "libfifo.so.1"), 0o644))
	require.NoError(t, os.Symlink("libfifo.so.1", filepath.Join(libDir, "libfifo.so")))

	dir, _ := writeBundle(t, bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=3"))
	done := make(chan error, 1)
	go func() {
		_, err := ModifyBundle(dir, jitConfig(tree.Root), seam)
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("a create in jit mode blocks on a FIFO of the host tree")
	}
	got := readBundle(t, dir)
	require.ElementsMatch(t, []string{"/dev/xpu3", "/dev/xpuctrl"}, devicePaths(got))
	for _, m := range got.Mounts {
		require.NotContains(t, m.Source, "libfifo")
	}
}
