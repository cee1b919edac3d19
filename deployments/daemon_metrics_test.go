package deployments

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/xpu-cdi/xpu-cdi/internal/deviceplugin"
	"github.com/xpu-cdi/xpu-cdi/internal/dra"
)

// TestChartDaemonMetrics: each daemon's serviceMonitor gives a headless
// Service on its health port selecting its pods, and a ServiceMonitor
// selecting that Service only; off by default; the daemons' dashboard is
// the shipped file.
func TestChartDaemonMetrics(t *testing.T) {
	r := render(t)
	for _, s := range r.services {
		require.NotContains(t, s.Name, "-metrics", "no daemon Service by default")
	}
	for _, cm := range r.configMaps {
		require.NotContains(t, cm.Data, "xpu-daemons.json", "no daemons' dashboard by default")
	}

	for _, tc := range []struct {
		description string
		args        []string
		app         string
		port        int32
	}{
		{"device plugin", []string{"devicePlugin.serviceMonitor.enabled=true,devicePlugin.serviceMonitor.labels.release=prom,devicePlugin.serviceMonitor.interval=15s,daemonDashboard.enabled=true"}, "xpu-device-plugin", 9508},
		{"DRA driver", []string{"dra.enabled=true,devicePlugin.enabled=false,dra.serviceMonitor.enabled=true,dra.serviceMonitor.labels.release=prom,dra.serviceMonitor.interval=15s,daemonDashboard.enabled=true,hostNetwork=true"}, "xpu-dra-driver", 9509},
	} {
		t.Run(tc.description, func(t *testing.T) {
			r := render(t, "--set", tc.args[0])
			ds := r.daemonSets[tc.app]
			require.NotNil(t, ds)
			i := slices.IndexFunc(r.services, func(s *corev1.Service) bool { return s.Labels["app.kubernetes.io/name"] == tc.app })
			require.GreaterOrEqual(t, i, 0, "a Service of %s", tc.app)
			svc := r.services[i]
			require.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "headless: every pod is scraped")
			require.Equal(t, []corev1.ServicePort{{Name: "metrics", Port: tc.port, TargetPort: intstr.FromInt32(tc.port), Protocol: corev1.ProtocolTCP}}, svc.Spec.Ports)
			for k, v := range svc.Spec.Selector {
				require.Equal(t, v, ds.Spec.Template.Labels[k], "the Service selects the daemon's pods")
			}
			c := ds.Spec.Template.Spec.Containers[0]
			require.Equal(t, tc.port, c.LivenessProbe.HTTPGet.Port.IntVal+portByName(c, c.LivenessProbe.HTTPGet.Port.StrVal), "the Service's port is the health port the probes use")

			var sm map[string]any
			for _, m := range r.serviceMonitors {
				if m["metadata"].(map[string]any)["labels"].(map[string]any)["app.kubernetes.io/name"] == tc.app {
					sm = m
				}
			}
			require.NotNil(t, sm, "a ServiceMonitor of %s", tc.app)
			require.Equal(t, "prom", sm["metadata"].(map[string]any)["labels"].(map[string]any)["release"])
			spec := sm["spec"].(map[string]any)
			sel := spec["selector"].(map[string]any)["matchLabels"].(map[string]any)
			for k, v := range sel {
				require.Equal(t, v, svc.Labels[k], "the ServiceMonitor selects the Service (label %s)", k)
			}
			require.Equal(t, "metrics", sel["app.kubernetes.io/component"], "and not the exporter's")
			endpoint := spec["endpoints"].([]any)[0].(map[string]any)
			require.Equal(t, "metrics", endpoint["port"])
			require.Equal(t, "/metrics", endpoint["path"])
			require.Equal(t, "15s", endpoint["interval"])

			i = slices.IndexFunc(r.configMaps, func(cm *corev1.ConfigMap) bool { return cm.Data["xpu-daemons.json"] != "" })
			require.GreaterOrEqual(t, i, 0)
			cm := r.configMaps[i]
			require.Equal(t, "1", cm.Labels["grafana_dashboard"])
			shipped, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "xpu-daemons.json"))
			require.NoError(t, err)
			require.JSONEq(t, string(shipped), cm.Data["xpu-daemons.json"])
		})
	}
}

// portByName is the container port named name (0 for none or "").
func portByName(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if name != "" && p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// daemonDashboardQueries returns every PromQL expression of the daemons'
// dashboard.
func daemonDashboardQueries(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "xpu-daemons.json"))
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(data, &d))
	var out []string
	for _, p := range d.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, "panel %q", p.Title)
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			out = append(out, v.Definition)
		}
	}
	return out
}

// TestDaemonDashboardQueries: every metric the daemons' dashboard names is
// one the device plugin or the DRA driver exports, every label it groups or
// filters by is one their series carry (or Prometheus' instance), and it
// shows the rates, errors and p99 latencies of both.
func TestDaemonDashboardQueries(t *testing.T) {
	metrics := append(deviceplugin.MetricNames(), dra.MetricNames()...)
	labels := []string{"resource", "cause", "operation", "health", "version", "commit", "le", "instance", "__name__"}
	used := map[string]bool{}
	for _, q := range daemonDashboardQueries(t) {
		names := regexp.MustCompile(`\bxpu_[a-z_]+\b`).FindAllString(q, -1)
		require.NotEmpty(t, names, "query %q names no xpu metric", q)
		for _, n := range names {
			require.Contains(t, metrics, n, "query %q", q)
			used[n] = true
		}
		for _, m := range regexp.MustCompile(`\bby \(([^)]*)\)`).FindAllStringSubmatch(q, -1) {
			for _, l := range strings.Split(m[1], ",") {
				require.Contains(t, labels, strings.TrimSpace(l), "query %q groups by an unknown label", q)
			}
		}
		for _, m := range regexp.MustCompile(`([a-z_]+)\s*(=~|!=|=)\s*"`).FindAllStringSubmatch(q, -1) {
			require.Contains(t, labels, m[1], "query %q filters on an unknown label", q)
		}
		require.Equal(t, strings.Count(q, "("), strings.Count(q, ")"), "query %q", q)
		require.Equal(t, strings.Count(q, "{"), strings.Count(q, "}"), "query %q", q)
	}
	for _, m := range []string{
		"xpu_device_plugin_allocations_total", "xpu_device_plugin_allocation_errors_total", "xpu_device_plugin_allocate_duration_seconds_bucket",
		"xpu_dra_driver_claims_total", "xpu_dra_driver_claim_errors_total", "xpu_dra_driver_operation_duration_seconds_bucket",
		"xpu_dra_driver_resourceslice_write_refusals_total",
	} {
		require.True(t, used[m], "the dashboard shows no %s", m)
	}
}
