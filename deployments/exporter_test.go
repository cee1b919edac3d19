package deployments

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/exporter"
)

func TestChartExporter(t *testing.T) {
	r := render(t)
	ds := r.daemonSets["xpu-exporter"]
	require.NotNil(t, ds, "exporter.enabled is true by default")
	checkPod(t, ds, exporterReads(t))
	c := ds.Spec.Template.Spec.Containers[0]
	require.Equal(t, []string{"/usr/bin/xpu-exporter"}, c.Command)
	e := env(c)
	require.Equal(t, "/host", e["XPU_CDI_HOST_ROOT"])
	require.Equal(t, ":9507", e["XPU_CDI_EXPORTER_LISTEN_ADDRESS"])
	require.Equal(t, "/var/lib/kubelet/pod-resources/kubelet.sock", e["XPU_CDI_POD_RESOURCES_SOCKET"])
	require.Equal(t, "/etc/cdi", e["XPU_CDI_SPEC_DIRS"], "the installer's spec, as the device plugin")
	require.Equal(t, []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9507, Protocol: corev1.ProtocolTCP}}, c.Ports)
	require.Equal(t, "5s", e["XPU_CDI_EXPORTER_MIN_COLLECTION_INTERVAL"])
	require.Equal(t, "16", e["XPU_CDI_EXPORTER_MAX_PODS_PER_XPU"])
	require.NotNil(t, c.LivenessProbe, "a stuck collection restarts the exporter")
	require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	require.Equal(t, "metrics", c.LivenessProbe.HTTPGet.Port.String())
	require.Greater(t, c.LivenessProbe.PeriodSeconds*c.LivenessProbe.FailureThreshold, int32(60), "longer than a collection may take (--collection-stuck-after 1m)")
	require.True(t, *c.SecurityContext.Privileged, "xpu-smi opens the XPUs' nodes")
	require.Equal(t, map[string]string{"/host": "/", "/var/lib/kubelet/pod-resources": "/var/lib/kubelet/pod-resources", "/etc/cdi": "/etc/cdi"}, hostPaths(ds))
	for _, m := range c.VolumeMounts {
		require.True(t, m.ReadOnly, "%s: the exporter writes nothing", m.MountPath)
	}
	require.Len(t, r.services, 1)
	svc := r.services[0]
	require.Equal(t, "metrics", svc.Spec.Ports[0].Name)
	require.Equal(t, int32(9507), svc.Spec.Ports[0].Port)
	for k, v := range svc.Spec.Selector {
		require.Equal(t, v, ds.Spec.Template.Labels[k], "the Service selects the exporter's pods")
	}
	require.Empty(t, r.serviceMonitors)
	require.Empty(t, r.configMaps, "no dashboard by default")

	t.Run("options", func(t *testing.T) {
		tree := "/var/lib/driver-tree"
		r := render(t, "--set", "exporter.port=9600,exporter.privileged=false,exporter.serviceMonitor.enabled=true,exporter.serviceMonitor.labels.release=prom,exporter.dashboard.enabled=true,exporter.minCollectionInterval=15s,exporter.maxPodsPerXPU=4",
			"--set", "host.devRoot="+tree+",host.driverRoot="+tree)
		ds := r.daemonSets["xpu-exporter"]
		checkPod(t, ds, exporterReads(t))
		c := ds.Spec.Template.Spec.Containers[0]
		require.Nil(t, c.SecurityContext.Privileged)
		require.Equal(t, []corev1.Capability{"SYS_CHROOT"}, c.SecurityContext.Capabilities.Add)
		require.Equal(t, ":9600", env(c)["XPU_CDI_EXPORTER_LISTEN_ADDRESS"])
		require.Equal(t, "15s", env(c)["XPU_CDI_EXPORTER_MIN_COLLECTION_INTERVAL"])
		require.Equal(t, "4", env(c)["XPU_CDI_EXPORTER_MAX_PODS_PER_XPU"])
		require.Equal(t, tree, hostPaths(ds)["/host"])
		require.Len(t, r.serviceMonitors, 1)
		sm := r.serviceMonitors[0]
		require.Equal(t, "prom", sm["metadata"].(map[string]any)["labels"].(map[string]any)["release"])
		endpoint := sm["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
		require.Equal(t, "metrics", endpoint["port"])
		require.Equal(t, false, endpoint["honorLabels"], "the target's pod, namespace and container win; the holder's are exported_*")
		require.Len(t, r.configMaps, 1)
		cm := r.configMaps[0]
		require.Equal(t, "1", cm.Labels["grafana_dashboard"])
		shipped, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "xpu-exporter.json"))
		require.NoError(t, err)
		require.JSONEq(t, string(shipped), cm.Data["xpu-exporter.json"])
	})
	t.Run("off", func(t *testing.T) {
		r := render(t, "--set", "exporter.enabled=false")
		require.NotContains(t, r.daemonSets, "xpu-exporter")
		require.Empty(t, r.services)
	})
	t.Run("device access", func(t *testing.T) {
		// With the device plugin (the default): privileged, no claim.
		require.Nil(t, ds.Spec.Template.Spec.ResourceClaims)
		require.Nil(t, c.Resources.Claims)
		require.NotContains(t, env(c), "XPU_CDI_EXPORTER_POD_NAME")
		for _, name := range []string{"xpu-exporter", "xpu-exporter-claim"} {
			for _, ct := range r.claimTemplates {
				require.NotEqual(t, name, ct.Labels["app.kubernetes.io/name"])
			}
		}
		dra := "dra.enabled=true,devicePlugin.enabled=false"
		// Under DRA: the admin-access claim for every XPU, no privilege.
		r := render(t, "--set", dra)
		ds := r.daemonSets["xpu-exporter"]
		checkPod(t, ds, exporterReads(t))
		c := ds.Spec.Template.Spec.Containers[0]
		require.Nil(t, c.SecurityContext.Privileged)
		require.Equal(t, []corev1.Capability{"SYS_CHROOT"}, c.SecurityContext.Capabilities.Add)
		require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
		var tmpl *resourceapi.ResourceClaimTemplate
		for _, ct := range r.claimTemplates {
			if ct.Labels["app.kubernetes.io/name"] == "xpu-exporter" {
				tmpl = ct
			}
		}
		require.NotNil(t, tmpl, "the exporter's ResourceClaimTemplate")
		require.Equal(t, "xpu-system", tmpl.Namespace)
		reqs := tmpl.Spec.Spec.Devices.Requests
		require.Len(t, reqs, 1)
		require.Equal(t, "xpu.baidu.com", reqs[0].Exactly.DeviceClassName)
		require.Equal(t, resourceapi.DeviceAllocationModeAll, reqs[0].Exactly.AllocationMode)
		require.True(t, *reqs[0].Exactly.AdminAccess)
		require.Equal(t, []corev1.PodResourceClaim{{Name: "xpus", ResourceClaimTemplateName: &tmpl.Name}}, ds.Spec.Template.Spec.ResourceClaims)
		require.Equal(t, []corev1.ResourceClaim{{Name: "xpus"}}, c.Resources.Claims)
		require.Equal(t, "64Mi", c.Resources.Limits.Memory().String(), "the resources stay")
		var self []string
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				self = append(self, e.Name+"="+e.ValueFrom.FieldRef.FieldPath)
			}
		}
		require.Equal(t, []string{"XPU_CDI_EXPORTER_POD_NAMESPACE=metadata.namespace", "XPU_CDI_EXPORTER_POD_NAME=metadata.name"}, self, "its own claim is not a holder")

		// Overrides and the modes where the claim cannot work: privileged.
		for _, set := range []string{dra + ",exporter.privileged=true", dra + ",exporter.adminAccessClaim=false", dra + ",partitions.layout=all=2", dra + ",dra.deviceClasses.all.enabled=false"} {
			r := render(t, "--set", set)
			ds := r.daemonSets["xpu-exporter"]
			require.Nil(t, ds.Spec.Template.Spec.ResourceClaims, set)
			require.True(t, *ds.Spec.Template.Spec.Containers[0].SecurityContext.Privileged, set)
		}
		// privileged=false under DRA: the claim, not privileged (the default).
		r = render(t, "--set", dra+",exporter.privileged=false")
		require.NotNil(t, r.daemonSets["xpu-exporter"].Spec.Template.Spec.ResourceClaims)
		// Contradictions fail at install, naming the values.
		for _, tc := range []struct{ set, err string }{
			{"exporter.adminAccessClaim=true", "exporter.adminAccessClaim=true without dra.enabled"},
			{dra + ",exporter.adminAccessClaim=true,exporter.privileged=true", "exporter.adminAccessClaim=true with exporter.privileged=true"},
			{dra + ",exporter.adminAccessClaim=true,partitions.layout=all=2", "exporter.adminAccessClaim=true with partitions.layout, partitions.nodeLabel or dra.partitions.mode=dynamic"},
			{dra + ",exporter.adminAccessClaim=true,dra.partitions.mode=dynamic", "exporter.adminAccessClaim=true with partitions.layout, partitions.nodeLabel or dra.partitions.mode=dynamic: the claim holds every XPU of the node"},
			{dra + ",exporter.adminAccessClaim=true,dra.deviceClasses.all.enabled=false", "exporter.adminAccessClaim=true with dra.deviceClasses.all.enabled=false"},
			{"exporter.adminAccessClaim=yes", "adminAccessClaim"},
			{"exporter.privileged=maybe", "privileged"},
		} {
			_, err := helmTemplate(t, "--set", tc.set)
			require.ErrorContains(t, err, tc.err, tc.set)
		}
	})
	t.Run("roots apart", func(t *testing.T) {
		_, err := helmTemplate(t, "--set", "host.devRoot=/a,host.driverRoot=/b")
		require.ErrorContains(t, err, "host.devRoot and host.driverRoot apart")
	})
}

// dashboard is the part of a Grafana dashboard the check reads.
type dashboard struct {
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

// dashboardQueries returns every PromQL expression of the shipped dashboard.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "xpu-exporter.json"))
	require.NoError(t, err)
	var d dashboard
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

// TestDashboardQueries: every metric the dashboard's queries name is one the
// exporter exports, and every label they group or filter by is one its
// series carry (or Prometheus' own instance and job). The end-to-end test
// runs the same queries on a real Prometheus.
func TestDashboardQueries(t *testing.T) {
	metrics := exporter.MetricNames()
	labels := append(exporter.LabelNames(), "instance", "job")
	used := map[string]bool{}
	for _, q := range dashboardQueries(t) {
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
	for _, m := range []string{"xpu_utilization_ratio", "xpu_memory_used_bytes", "xpu_temperature_celsius", "xpu_power_watts", "xpu_healthy"} {
		require.True(t, used[m], "the dashboard shows no %s", m)
	}
}
