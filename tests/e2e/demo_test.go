package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestMakeDemo runs the README's first command the way a newcomer does
// (minus the package installation, which `make test` has done) and checks
// that the container it starts saw the XPU.
func TestMakeDemo(t *testing.T) {
	harness.RequiresRoot(t)
	harness.RequiresTool(t, "podman")
	if _, err := os.Stat("/var/run/cdi/baidu.com-xpu-demo.yaml"); err == nil {
		testreq.HostInUse(t, "a demo spec, /var/run/cdi/baidu.com-xpu-demo.yaml, is installed on this host")
	}
	cmd := exec.Command("make", "--no-print-directory", "demo")
	cmd.Dir = moduleRoot(t)
	cmd.Env = append(os.Environ(), "XPU_DEMO_NO_INSTALL=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	text := string(out)
	// What the container printed comes after the podman step's header
	// ("==> [12.3 s] podman run ...": each header says how long the demo
	// has run).
	_, inside, found := strings.Cut(string(out), "s] podman run")
	require.True(t, found, "%s", out)
	// The demo host is a P800 with driver and XRE 5.x: nodes 195:N and
	// xpuctrl 195:255, the XRE libraries in so/, a dynamic xpu-smi.
	require.Regexp(t, `(?m)^crw-rw-rw-.* 195, +0 .*/dev/xpu0$`, inside)
	require.Regexp(t, `(?m)^crw-rw-rw-.* 195, +255 .*/dev/xpuctrl$`, inside)
	require.NotRegexp(t, `(?m)/dev/xpu[1-9]$`, inside)
	require.Contains(t, inside, "libxpurt.so.2")
	require.Contains(t, inside, "libcuda.so.1")
	require.Contains(t, inside, "XPU-SMI 5")
	require.Contains(t, inside, "1 device(s) found", "xpu-smi (linked against libxpuml.so.1 and libxpunvidia-ml.so.1) ran in the container")
	// The p800-sysfs shape: /dev/xpu0 is the card at 0000:82:00.0, found
	// through /sys/dev/char, and the demo asks for it by that address.
	require.Contains(t, text, "--device baidu.com/xpu-demo=0000:82:00.0")
	require.Regexp(t, `(?m)^XPU_CDI_DEVICE_0=0000:82:00\.0$`, inside)
	require.NotContains(t, inside, "=unknown")
	// It builds what it runs in one go build (hack/gobuild.sh with three
	// packages), not the daemons.
	require.Equal(t, 1, strings.Count(text, "hack/gobuild.sh "), "%s", text)
	require.Contains(t, text, "./cmd/xpu-cdi ./cmd/xpu-runtime-hook ./internal/cmd/xpu-fakehost\n")
	// No kubelet runs in the demo: xpu-cdi is built without the
	// PodResources client, a third of a first build's compile.
	require.Contains(t, text, "GOTAGS=no_podresources ")
	for _, daemon := range []string{"xpu-device-plugin", "xpu-dra-driver", "xpu-exporter", "xpu-container-runtime"} {
		require.NotContains(t, text, daemon)
	}
	// The spec is shown as a summary of its devices, not as its YAML.
	require.Contains(t, text, "validate --summary")
	require.NotContains(t, text, "cdiVersion:")
	// info says why the host has no /proc/xpu, in a note, not as a problem.
	require.Contains(t, string(out), "runtime library: /usr/local/xpu/so/libxpurt.so.2")
	require.NotContains(t, string(out), "does not seem to be loaded")
	require.NoFileExists(t, "/var/run/cdi/baidu.com-xpu-demo.yaml", "the demo cleans up")
	matches, _ := filepath.Glob("/tmp/xpu-cdi-demo.*")
	require.Empty(t, matches, "the demo removes its temporary directory")
}
