package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// process is a program the test runs on the node, killed at the end.
type process struct {
	name string
	log  *syncBuffer
}

func startProcess(t *testing.T, name string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(name, args...)
	p := &process{name: filepath.Base(name), log: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("%s log:\n%s", p.name, p.log.String())
		}
	})
	return p
}

// TestExporterPrometheus runs the xpu-exporter binary on the node of the
// test cluster (as the host package's xpu-exporter.service does) against a
// fake P800 host, with the real device plugin and the real DRA driver: one
// pod gets an XPU through the device plugin, another one through a DRA
// claim. A real Prometheus (Debian's) scrapes the exporter and answers
// xpu_memory_used_bytes{exported_pod=...} for each pod with the value of
// the fake xpu-smi's state file for its XPU; `promtool check metrics` finds
// nothing to say about a scrape; the dashboard's queries run on that
// Prometheus. A second job scrapes it as the Prometheus operator does from
// the chart's ServiceMonitor (operatorScrapeConfig): the target's pod,
// namespace and container are the exporter pod's, and a free XPU has no
// holder (with honorLabels and holder labels named pod, every free XPU
// showed as held by the exporter pod, and so did the dashboard).
func TestExporterPrometheus(t *testing.T) {
	harness.RequiresRoot(t)
	harness.RequiresTool(t, "prometheus")
	harness.RequiresTool(t, "promtool")
	d := startDRA(t, func(t testing.TB) harness.CRI { return harness.NewContainerd(t) })
	plugin := startDevicePlugin(t, d.tree, harness.DevicePluginDir, "--vendor", d.vendor, "--cdi-spec-dir", d.SpecDir())
	require.Eventually(t, func() bool { return strings.Contains(plugin.log.String(), "registered baidu.com/xpu") }, podTimeout, 250*time.Millisecond)
	waitAllocatable(t, d.Cluster, "baidu.com/xpu", "8")

	// The fake xpu-smi's telemetry: another memory use per XPU.
	state := fakehost.DefaultTelemetry(d.tree)
	usedOf := map[string]int64{} // by PCI address
	for i := range state.Devices {
		state.Devices[i].UsedMiB = int64(1000 + 111*i)
		state.Devices[i].Utilization = int64(10 + i)
		usedOf[state.Devices[i].BusID] = state.Devices[i].UsedMiB
	}
	require.NoError(t, fakehost.WriteXPUSMIState(d.tree.Root, state))

	// A pod with one XPU of the device plugin.
	d.ApplyObjects(t, limitsPod("xpu-plugin-pod", d.image, "baidu.com/xpu"))
	d.WaitPodRunning(t, "default", "xpu-plugin-pod", podTimeout)
	idx := xpusOf(t, d.Cluster, d.tree, "xpu-plugin-pod")
	require.Len(t, idx, 1, "one XPU")
	pluginIdx := idx[0]

	// A pod with one XPU of a DRA claim, another one than the plugin's.
	d.ApplyObjects(t, claimTemplate("one-other-xpu", 1, false, fmt.Sprintf(`device.attributes["xpu.baidu.com"].index != %d`, pluginIdx)))
	d.ApplyObjects(t, xpuPod("xpu-dra-pod", d.image, "template:one-other-xpu"))
	d.WaitPodRunning(t, "default", "xpu-dra-pod", podTimeout)
	draIdx := d.allocated(t, "xpu-dra-pod")
	require.Len(t, draIdx, 1)

	exporterPort := harness.FreePort(t)
	exporterURL := "http://127.0.0.1:" + strconv.Itoa(exporterPort)
	startProcess(t, Binary(t, "xpu-exporter"), "--dev-root", d.tree.Root, "--driver-root", d.tree.Root,
		"--web.listen-address", "127.0.0.1:"+strconv.Itoa(exporterPort),
		"--pod-resources-socket", filepath.Join(d.KubeletRootDir, "pod-resources", "kubelet.sock"),
		"--vendor", d.vendor, "--cdi-spec-dir", d.SpecDir())
	var scrape string
	require.Eventually(t, func() bool {
		var err error
		scrape, err = httpGet(exporterURL + "/metrics")
		return err == nil && strings.Contains(scrape, `exported_pod="xpu-dra-pod"`) && strings.Contains(scrape, `exported_pod="xpu-plugin-pod"`)
	}, podTimeout, 250*time.Millisecond, "the exporter's scrape:\n%s", scrape)
	require.Contains(t, scrape, `xpu_exporter_source_up{source="pod-resources"} 1`)
	require.Contains(t, scrape, `xpu_exporter_source_up{source="xpu-smi"} 1`)

	// promtool's lint of the exposition: nothing to say.
	promtoolCheckMetrics(t, scrape, "the exporter")

	// A real Prometheus scraping the exporter every second.
	operatorJob, operatorConfig := operatorScrapeConfig(t, exporterPort)
	promURL := startPrometheus(t, staticScrapeJob("xpu", "127.0.0.1:"+strconv.Itoa(exporterPort)), operatorConfig)

	busOf := map[int]string{}
	for _, dev := range d.tree.Devices {
		busOf[dev.Index] = dev.BDF
	}
	for _, tc := range []struct {
		pod   string
		idx   int
		claim bool
	}{
		{"xpu-plugin-pod", pluginIdx, false},
		{"xpu-dra-pod", draIdx[0], true},
	} {
		t.Run(tc.pod, func(t *testing.T) {
			q := fmt.Sprintf(`xpu_memory_used_bytes{job="xpu",exported_pod=%q}`, tc.pod)
			var res promResult
			testutil.Eventually(t, func(t testing.TB) bool {
				res = promQuery(t, promURL, q)
				return assert.Len(t, res.Data.Result, 1)
			}, podTimeout, 500*time.Millisecond, q)
			m := res.Data.Result[0].Metric
			require.Equal(t, strconv.Itoa(tc.idx), m["xpu"])
			require.Equal(t, busOf[tc.idx], m["pci_bus_id"])
			require.Equal(t, "default", m["exported_namespace"])
			require.Equal(t, "main", m["exported_container"])
			if tc.claim {
				require.NotEmpty(t, m["claim"])
				require.Equal(t, "default", m["claim_namespace"])
			} else {
				require.NotContains(t, m, "claim")
			}
			want := float64(usedOf[busOf[tc.idx]] << 20)
			got, err := strconv.ParseFloat(res.Data.Result[0].Value[1].(string), 64)
			require.NoError(t, err)
			require.Equal(t, want, got, "the fake host's state file says %d MiB", usedOf[busOf[tc.idx]])
		})
	}

	// Scraped as the operator does: the target's labels are the exporter
	// pod's; the holder's are exported_*, on held XPUs only.
	t.Run("ServiceMonitor", func(t *testing.T) {
		held := map[string]string{strconv.Itoa(pluginIdx): "xpu-plugin-pod", strconv.Itoa(draIdx[0]): "xpu-dra-pod"}
		q := fmt.Sprintf(`xpu_healthy{job=%q}`, operatorJob)
		var res promResult
		testutil.Eventually(t, func(t testing.TB) bool {
			res = promQuery(t, promURL, q)
			return len(res.Data.Result) == len(d.tree.ComputeDevices())
		}, podTimeout, 500*time.Millisecond, "%s: %+v", q, res)
		for _, r := range res.Data.Result {
			m := r.Metric
			require.Equal(t, operatorPod, m["pod"], "%v: the target's pod label", m)
			require.Equal(t, "xpu-exporter", m["container"], "%v", m)
			require.Equal(t, "metrics", m["endpoint"], "%v", m)
			if pod, ok := held[m["xpu"]]; ok {
				require.Equal(t, pod, m["exported_pod"], "%v", m)
				require.Equal(t, "default", m["exported_namespace"], "%v", m)
				continue
			}
			for _, l := range []string{"exported_pod", "exported_namespace", "exported_container", "claim"} {
				require.NotContains(t, m, l, "a free XPU has no holder: %v", m)
			}
		}
		// The dashboard's per-pod panels: the two pods, not the exporter.
		for _, expr := range []string{
			`max by (exported_namespace, exported_pod, xpu) (xpu_utilization_ratio{job="` + operatorJob + `", exported_pod!=""})`,
			`sum by (exported_namespace, exported_pod) (xpu_memory_used_bytes{job="` + operatorJob + `", exported_pod!=""})`,
		} {
			pods := map[string]bool{}
			for _, r := range promQuery(t, promURL, expr).Data.Result {
				pods[r.Metric["exported_pod"]] = true
			}
			require.Equal(t, map[string]bool{"xpu-plugin-pod": true, "xpu-dra-pod": true}, pods, expr)
		}
	})

	// The dashboard's queries evaluate on Prometheus, and those of the
	// metrics this host has give series.
	deadline := time.Now().Add(podTimeout)
	for _, q := range dashboardQueries(t, "xpu-exporter.json") {
		if strings.Contains(q.Expr, "xpu_health_info") {
			promQuery(t, promURL, q.Expr) // every XPU is healthy: no series, but the query runs
			continue
		}
		testutil.Eventually(t, func(t testing.TB) bool { return assert.NotEmpty(t, promQuery(t, promURL, q.Expr).Data.Result) },
			time.Until(deadline), 500*time.Millisecond, "panel %q: %s", q.Panel, q.Expr)
	}
}

// operatorPod is the exporter pod's name the operator's scrape job gives
// its target.
const operatorPod = "xpu-exporter-e2e"

// operatorScrapeConfig renders the chart's ServiceMonitor and writes the
// scrape job the Prometheus operator generates from it, for the exporter
// on port: honor_labels and the path from the ServiceMonitor's endpoint,
// and the operator's relabeling of an endpoints target, which gives every
// series namespace, service, pod, container, job (the Service's name) and
// endpoint (the port's name). Kubernetes discovery's meta labels are the
// static target's labels here, as the exporter runs on the node rather
// than in a pod. It returns the job label and the job (a scrape_configs
// entry).
func operatorScrapeConfig(t *testing.T, port int) (string, map[string]any) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), "template", "xpu", filepath.Join(moduleRoot(t), "deployments", "helm", "xpu-cdi"),
		"--namespace", "xpu-system", "--kube-version", "1.37.2", "--show-only", "templates/exporter.yaml", "--set", "exporter.serviceMonitor.enabled=true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "helm template: %s", stderr.String())
	type serviceMonitor struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec struct {
			Endpoints []struct {
				Port        string `json:"port"`
				Path        string `json:"path"`
				HonorLabels bool   `json:"honorLabels"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	var sm *serviceMonitor
	var service string
	for _, doc := range strings.Split(string(out), "\n---") {
		var obj serviceMonitor
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		switch obj.Kind {
		case "ServiceMonitor":
			sm = &obj
		case "Service":
			service = obj.Metadata.Name
		}
	}
	require.NotNil(t, sm, "the chart renders no ServiceMonitor:\n%s", out)
	require.NotEmpty(t, service)
	require.Len(t, sm.Spec.Endpoints, 1)
	ep := sm.Spec.Endpoints[0]
	job := fmt.Sprintf("serviceMonitor/%s/%s/0", sm.Metadata.Namespace, sm.Metadata.Name)
	relabel := func(source, target string) map[string]any {
		return map[string]any{"source_labels": []string{source}, "target_label": target}
	}
	return service, map[string]any{
		"job_name":     job,
		"honor_labels": ep.HonorLabels,
		"metrics_path": ep.Path,
		"static_configs": []any{map[string]any{
			"targets": []string{"127.0.0.1:" + strconv.Itoa(port)},
			"labels": map[string]string{
				"__meta_kubernetes_namespace":          sm.Metadata.Namespace,
				"__meta_kubernetes_service_name":       service,
				"__meta_kubernetes_pod_name":           operatorPod,
				"__meta_kubernetes_pod_container_name": "xpu-exporter",
				"__meta_kubernetes_endpoint_port_name": ep.Port,
			},
		}},
		"relabel_configs": []any{
			relabel("job", "__tmp_prometheus_job_name"),
			map[string]any{"source_labels": []string{"__meta_kubernetes_endpoint_port_name"}, "regex": ep.Port, "action": "keep"},
			relabel("__meta_kubernetes_namespace", "namespace"),
			relabel("__meta_kubernetes_service_name", "service"),
			relabel("__meta_kubernetes_pod_name", "pod"),
			relabel("__meta_kubernetes_pod_container_name", "container"),
			map[string]any{"source_labels": []string{"__meta_kubernetes_service_name"}, "target_label": "job", "replacement": "${1}"},
			map[string]any{"target_label": "endpoint", "replacement": ep.Port},
		},
	}
}
