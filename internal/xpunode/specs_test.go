package xpunode

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func TestSpecHint(t *testing.T) {
	require.Equal(t, "xpu-cdi generate --output /var/run/cdi/baidu.com-xpu.yaml", SpecHint("baidu.com/xpu"))
	require.Equal(t, "xpu-cdi generate --vendor example.com --class gpu --output /var/run/cdi/example.com-gpu.yaml", SpecHint("example.com/gpu"))
}

// TestSpecCheckerHostileFiles: a FIFO named other.yaml or a link to
// /dev/zero in a spec directory is an error of that file, in bounded time
// (the library's cache blocked on the FIFO forever, hanging print-slice,
// the device plugin and Prepare), and the other specs still count.
func TestSpecCheckerHostileFiles(t *testing.T) {
	for _, tc := range []struct {
		description string
		plant       func(path string) error
	}{
		{description: "a FIFO", plant: func(path string) error { return unix.Mkfifo(path, 0o644) }},
		{description: "a link to /dev/zero", plant: func(path string) error { return os.Symlink("/dev/zero", path) }},
	} {
		t.Run(tc.description, func(t *testing.T) {
			dir := t.TempDir()
			spec := "cdiVersion: 0.6.0\nkind: baidu.com/xpu\ndevices:\n- name: \"0\"\n  containerEdits:\n    env: [\"A=1\"]\n"
			require.NoError(t, os.WriteFile(filepath.Join(dir, "baidu.com-xpu.yaml"), []byte(spec), 0o644))
			other := filepath.Join(dir, "other.yaml")
			require.NoError(t, tc.plant(other))
			type result struct {
				names map[string]bool
				err   error
			}
			done := make(chan result, 1)
			go func() {
				names, _, err := NewSpecChecker("baidu.com/xpu", []string{dir}).Check(&discover.Host{})
				done <- result{names, err}
			}()
			select {
			case r := <-done:
				require.ErrorIs(t, r.err, fdio.ErrNotRegular)
				require.ErrorContains(t, r.err, other)
				require.Equal(t, map[string]bool{"0": true}, r.names)
			case <-time.After(10 * time.Second):
				t.Fatal("Check blocks")
			}
		})
	}
}
