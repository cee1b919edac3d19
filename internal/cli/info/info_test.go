package info_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/common"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/info"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func run(t *testing.T, root string, args ...string) (string, string, error) {
	t.Helper()
	return clitest.Run(t, info.NewCommand, append(append([]string{"info"}, args...), clitest.Roots(root)...)...)
}

func TestInfoJSON(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.Degraded())
	stdout, _, err := run(t, root, "--json")
	require.NoError(t, err)
	require.True(t, json.Valid([]byte(stdout)), stdout)
	require.Contains(t, stdout, `"index": 3`)
	require.Contains(t, stdout, `"state": "ERROR"`)
	require.Contains(t, stdout, `"model": "unknown"`)
	require.Contains(t, stdout, `xpu-smi not found`)
	text, _, err := run(t, root)
	require.NoError(t, err)
	require.Contains(t, text, "Problems:")
}

// TestInfoXRE5 runs info on the P800 (driver and XRE 5) host: one note per
// host-wide fact, nothing logged, no problem.
func TestInfoXRE5(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.P800XRE5())
	text, logs, err := run(t, root)
	require.NoError(t, err)
	require.Empty(t, logs, "info prints what it found; it logs nothing")
	require.Contains(t, text, "XRE: /usr/local/xpu -> /usr/local/xpu-5.0.21.47\n")
	require.Contains(t, text, "Control node: /dev/xpuctrl 195:255 ")
	require.NotContains(t, text, "Problems:")
	require.NotContains(t, text, "does not seem to be loaded")
	for _, line := range []string{
		"/proc/xpu not present",
		"/sys/class/xpu not present",
		"no PCI address for /dev/xpu0../dev/xpu7",
		"runtime library: /usr/local/xpu/so/libxpurt.so.2",
		"library /lib/x86_64-linux-gnu/libxpunvidia-ml.so.1 <- " + root + "/lib/x86_64-linux-gnu/libxpunvidia-ml.so.5.0.21.47",
		"library /usr/local/xpu/so/libcuda.so.1 <- ",
	} {
		require.Equal(t, 1, strings.Count(text, line), "%q once in\n%s", line, text)
	}
}

// TestInfoPrintsProblemsOnce checks that a host's warnings appear once,
// under Problems, and not also on the log.
func TestInfoPrintsProblemsOnce(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.Degraded())
	text, logs, err := run(t, root)
	require.NoError(t, err)
	require.NotContains(t, logs, "xpu-smi not found")
	require.Equal(t, 1, strings.Count(text, "xpu-smi not found"), text)
}

// TestInfoWithoutXPU: the error says where it looked and carries the hint
// main prints.
func TestInfoWithoutXPU(t *testing.T) {
	empty := t.TempDir()
	stdout, _, err := run(t, empty)
	require.ErrorIs(t, err, discover.ErrNoDevices)
	require.ErrorContains(t, err, "no Kunlun XPU found under "+empty)
	var hint *common.HintError
	require.True(t, errors.As(err, &hint))
	require.Contains(t, hint.Hint, "lsmod | grep kunlun")
	require.Empty(t, stdout)
}
