package generate_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// TestGenerateDriverArch generates the spec of the aarch64 R200 host:
// with --driver-arch arm64 (or XPU_CDI_DRIVER_ARCH) it mounts the aarch64
// XRE libraries without a warning; read as a host of the other machine it
// leaves each out with a warning naming it; a machine xpu-cdi does not
// know is refused, naming the flag, before anything is read.
func TestGenerateDriverArch(t *testing.T) {
	if runtime.GOARCH != "arm64" {
		testreq.Tool(t, "aarch64-linux-gnu-gcc")
	}
	root := clitest.FakeHost(t, fakehost.R200Arm64())
	args := []string{"--no-hooks"}

	spec, logs, err := gen(t, root, append(args, "--driver-arch", "arm64")...)
	require.NoError(t, err)
	require.NotContains(t, logs, "level=warning")
	require.Contains(t, spec, "/usr/local/xpu/lib64/libxpurt.so.1")

	t.Setenv("XPU_CDI_DRIVER_ARCH", "amd64")
	spec, logs, err = gen(t, root, args...)
	require.NoError(t, err)
	require.NotContains(t, spec, "libxpurt.so.1")
	require.Contains(t, logs, "/usr/local/xpu/lib64/libxpurt.so.1 under driver root "+root+" is built for aarch64, not for this host's x86-64 (amd64); left out")

	out := filepath.Join(t.TempDir(), "spec.yaml")
	_, _, err = gen(t, root, append(args, "--driver-arch", "sparc64", "--output", out)...)
	require.ErrorContains(t, err, `--driver-arch (XPU_CDI_DRIVER_ARCH): architecture "sparc64" is not supported`)
	_, statErr := os.Stat(out)
	require.ErrorIs(t, statErr, os.ErrNotExist)
}
