package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testutil"

	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// draHealthAddress is where the DRA driver of deployments/xpu-dra-driver.yaml
// serves its health endpoint and metrics: its default port, on the host
// network the test gives it.
const draHealthAddress = "127.0.0.1:9509"

// TestDaemonsPrometheus runs the device plugin binary and the DRA driver's
// DaemonSet (deployments/xpu-dra-driver.yaml) on the node of the test
// cluster with a fake P800 host; a real Prometheus (Debian's) scrapes
// both health ports. A pod gets an XPU through the device plugin, another
// through a DRA claim: Prometheus answers the plugin's Allocate and the
// driver's Prepare counted and timed, and the driver's Unprepare once the
// claim's pod is gone; the ResourceSlice write is counted; both build-info
// gauges are there; `promtool check metrics` finds nothing to say about
// either scrape; the daemons' dashboard queries run on that Prometheus.
func TestDaemonsPrometheus(t *testing.T) {
	harness.RequiresRoot(t)
	harness.RequiresTool(t, "prometheus")
	harness.RequiresTool(t, "promtool")
	d := startDRA(t, func(t testing.TB) harness.CRI { return harness.NewContainerd(t) })
	pluginAddress := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	plugin := startDevicePlugin(t, d.tree, harness.DevicePluginDir, "--vendor", d.vendor, "--cdi-spec-dir", d.SpecDir(), "--health-address", pluginAddress)
	require.Eventually(t, func() bool { return strings.Contains(plugin.log.String(), "registered baidu.com/xpu") }, podTimeout, 250*time.Millisecond)
	waitAllocatable(t, d.Cluster, "baidu.com/xpu", "8")

	// Each daemon's scrape passes promtool's lint.
	for _, addr := range []string{pluginAddress, draHealthAddress} {
		var scrape string
		require.Eventually(t, func() bool {
			var err error
			scrape, err = httpGet("http://" + addr + "/metrics")
			return err == nil
		}, podTimeout, 250*time.Millisecond, "GET http://%s/metrics", addr)
		promtoolCheckMetrics(t, scrape, addr)
		series := 0
		for _, line := range strings.Split(scrape, "\n") {
			if strings.HasPrefix(line, "xpu_") {
				series++
			}
		}
		t.Logf("%s: %d xpu_ series, %d bytes", addr, series, len(scrape))
	}

	promURL := startPrometheus(t, staticScrapeJob("xpu-device-plugin", pluginAddress), staticScrapeJob("xpu-dra-driver", draHealthAddress))

	// One pod through the device plugin, one through a DRA claim.
	d.ApplyObjects(t, limitsPod("xpu-plugin-pod", d.image, "baidu.com/xpu"))
	d.WaitPodRunning(t, "default", "xpu-plugin-pod", podTimeout)
	idx := xpusOf(t, d.Cluster, d.tree, "xpu-plugin-pod")
	require.Len(t, idx, 1)
	d.ApplyObjects(t, claimTemplate("one-other-xpu", 1, false, fmt.Sprintf(`device.attributes["xpu.baidu.com"].index != %d`, idx[0])))
	d.ApplyObjects(t, xpuPod("xpu-dra-pod", d.image, "template:one-other-xpu"))
	d.WaitPodRunning(t, "default", "xpu-dra-pod", podTimeout)

	waitAtLeast := func(q string, want float64) {
		t.Helper()
		var got float64
		testutil.Eventually(t, func(t testing.TB) bool {
			got = promValue(t, promURL, q)
			return got >= want
		}, podTimeout, 500*time.Millisecond, "%s: %v, want at least %v", q, got, want)
	}
	waitAtLeast(`xpu_device_plugin_allocations_total{job="xpu-device-plugin",resource="baidu.com/xpu"}`, 1)
	waitAtLeast(`xpu_device_plugin_allocated_devices_total{resource="baidu.com/xpu"}`, 1)
	waitAtLeast(`xpu_device_plugin_allocate_duration_seconds_count{resource="baidu.com/xpu"}`, 1)
	waitAtLeast(`xpu_device_plugin_registrations_total{resource="baidu.com/xpu"}`, 1)
	waitAtLeast(`xpu_device_plugin_build_info{job="xpu-device-plugin"}`, 1)
	waitAtLeast(`xpu_dra_driver_claims_total{job="xpu-dra-driver",operation="prepare"}`, 1)
	waitAtLeast(`xpu_dra_driver_operation_duration_seconds_count{operation="prepare"}`, 1)
	waitAtLeast(`sum(xpu_dra_driver_resourceslice_writes_total)`, 1)
	waitAtLeast(`xpu_dra_driver_resourceslice_publishes_total`, 1)
	waitAtLeast(`xpu_dra_driver_build_info{job="xpu-dra-driver"}`, 1)
	require.Equal(t, 0.0, promValue(t, promURL, `sum(xpu_dra_driver_claim_errors_total) or vector(0)`), "no claim failed")

	// The claim's pod goes: the kubelet unprepares the claim.
	d.deletePod(t, "xpu-dra-pod")
	waitAtLeast(`xpu_dra_driver_claims_total{operation="unprepare"}`, 1)

	// The daemons' dashboard: every query evaluates, and those of what
	// happened here give series.
	deadline := time.Now().Add(podTimeout)
	for _, q := range dashboardQueries(t, "xpu-daemons.json") {
		if strings.Contains(q.Expr, "errors_total") || strings.Contains(q.Expr, "refusals_total") {
			promQuery(t, promURL, q.Expr) // nothing failed: no series, but the query runs
			continue
		}
		testutil.Eventually(t, func(t testing.TB) bool { return assert.NotEmpty(t, promQuery(t, promURL, q.Expr).Data.Result) },
			time.Until(deadline), 500*time.Millisecond, "panel %q: %s", q.Panel, q.Expr)
	}
}
