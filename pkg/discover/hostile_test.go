package discover_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// TestDiscoverBoundedOnHostileFiles: FIFOs and oversized files where
// discovery reads (a procfs info file, the driver root's ld.so.cache, a
// library and a library link) never block it, and are skipped: the rest of
// the host is still found.
func TestDiscoverBoundedOnHostileFiles(t *testing.T) {
	for _, tc := range []struct {
		description string
		shape       func(t *testing.T, tree *fakehost.Tree)
	}{
		{
			description: "FIFOs",
			shape: func(t *testing.T, tree *fakehost.Tree) {
				fifo := func(p string) {
					require.NoError(t, os.RemoveAll(p))
					require.NoError(t, unix.Mkfifo(p, 0o644))
				}
				fifo(tree.Path("/proc/xpu/dev0/info"))
				fifo(tree.Path("/etc/ld.so.cache"))
				libDir := tree.Path(filepath.Dir(tree.Libraries[0].Path))
				fifo(filepath.Join(libDir, "libfifo.so.1"))
				require.NoError(t, os.Symlink("libfifo.so.1", filepath.Join(libDir, "libfifo.so")))
			},
		},
		{
			description: "oversized files",
			shape: func(t *testing.T, tree *fakehost.Tree) {
				big := func(p string, size int64) {
					require.NoError(t, os.RemoveAll(p))
					require.NoError(t, os.WriteFile(p, []byte("DeviceName:\t"), 0o644))
					require.NoError(t, os.Truncate(p, size))
				}
				big(tree.Path("/proc/xpu/dev0/info"), 1<<30)
				big(tree.Path("/etc/ld.so.cache"), 10<<30)
			},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tree := build(t, fakehost.P800x8())
			tc.shape(t, tree)
			type result struct {
				h   *discover.Host
				err error
			}
			done := make(chan result, 1)
			start := time.Now()
			go func() {
				h, err := discoverTree(t, tree)
				done <- result{h, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("discovery blocks")
			}
			t.Logf("discovery took %s", time.Since(start))
			require.NoError(t, r.err)
			require.Len(t, r.h.ComputeDevices(), 8, "the devices are still found")
			found := false
			for _, l := range r.h.Libraries {
				require.NotContains(t, l.HostPath, "libfifo", "a FIFO is never a library")
				found = found || strings.HasPrefix(l.Soname, discover.RuntimeFamily+".")
			}
			require.True(t, found, "the XRE is still found")
		})
	}
}
