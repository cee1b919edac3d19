package xpunode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio/fdiotest"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func TestSpecHint(t *testing.T) {
	require.Equal(t, "xpu-cdi generate --output /etc/cdi/baidu.com-xpu.yaml", SpecHint("baidu.com/xpu"))
	require.Equal(t, "xpu-cdi generate --vendor example.com --class gpu --output /etc/cdi/example.com-gpu.yaml", SpecHint("example.com/gpu"))
}

// TestSpecCheckerHostileFiles: a FIFO named other.yaml or a link to
// /dev/zero in a spec directory is an error of that file, in bounded time
// (the library's cache blocked on the FIFO forever, hanging print-slice,
// the device plugin and Prepare), and the other specs still count.
func TestSpecCheckerHostileFiles(t *testing.T) {
	for _, tc := range fdiotest.HostileFiles() {
		t.Run(tc.Description, func(t *testing.T) {
			dir := t.TempDir()
			spec := "cdiVersion: 0.6.0\nkind: baidu.com/xpu\ndevices:\n- name: \"0\"\n  containerEdits:\n    env: [\"A=1\"]\n"
			require.NoError(t, os.WriteFile(filepath.Join(dir, "baidu.com-xpu.yaml"), []byte(spec), 0o644))
			other := filepath.Join(dir, "other.yaml")
			require.NoError(t, tc.Plant(other))
			type result struct {
				names map[string]bool
				err   error
			}
			r := fdiotest.Within(t, "Check", func() result {
				names, _, err := NewSpecChecker("baidu.com/xpu", []string{dir}).Check(&discover.Host{})
				return result{names, err}
			})
			require.ErrorIs(t, r.err, fdio.ErrNotRegular)
			require.ErrorContains(t, r.err, other)
			require.Equal(t, map[string]bool{"0": true}, r.names)
		})
	}
}
