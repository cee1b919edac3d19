package deployments

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"
)

// TestChartSchemaRefuses: helm lint --strict and helm template refuse a
// value of the wrong type, or an unknown key, naming the key.
func TestChartSchemaRefuses(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want string // the key, as helm names it
	}{
		{"installer.enabled=yes", "/installer/enabled"},
		{"devicePlugin.healthCheckInterval=10", "/devicePlugin/healthCheckInterval"},
		{"dra.healthCheckInterval=often", "/dra/healthCheckInterval"},
		{"host.devRoot=run/driver", "/host/devRoot"},
		{"cdi.specFile=/var/run/cdi/xpu.txt", "/cdi/specFile"},
		{"logLevel=loud", "/logLevel"},
		{"devicePlugin.deviceListStrategy=envvar", "/devicePlugin/deviceListStrategy"},
		{"devicePlugin.partitionStrategy=none", "/devicePlugin/partitionStrategy"},
		{"dra.deviceClasses.partitions.sizes={48GB}", "/dra/deviceClasses/partitions/sizes/0"},
		{"tolerations=none", "/tolerations"},
		{"installer.nodeSelector.pool=1", "/installer/nodeSelector/pool"},
		{"installer.enabeld=true", "enabeld"},
		{"hostNetwork=1", "/hostNetwork"},
		{"exporter.maxPodsPerXPU=0", "/exporter/maxPodsPerXPU"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			out, err := exec.Command(helm(t), "lint", "--strict", "--kube-version", kubeVersion, chartDir, "--set", tc.set).CombinedOutput()
			require.Error(t, err, "helm lint accepted %s:\n%s", tc.set, out)
			require.Contains(t, string(out), tc.want, "helm lint does not name the key")
			_, err = helmTemplate(t, "--set", tc.set)
			require.ErrorContains(t, err, tc.want, "helm template (as install) refuses it too")
		})
	}
}

// TestChartSchemaCoversValues: the schema types every key of values.yaml
// and no key values.yaml lacks, so the two cannot drift apart.
func TestChartSchemaCoversValues(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	require.NoError(t, err)
	var schema map[string]any
	require.NoError(t, json.Unmarshal(data, &schema))
	defs := schema["definitions"].(map[string]any)
	var inSchema []string
	var walk func(prefix string, s map[string]any)
	walk = func(prefix string, s map[string]any) {
		if ref, ok := s["$ref"].(string); ok {
			s = defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
		}
		props, ok := s["properties"].(map[string]any)
		if !ok || isUserMap(prefix) {
			inSchema = append(inSchema, prefix)
			return
		}
		for k, sub := range props {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			walk(p, sub.(map[string]any))
		}
	}
	walk("", schema)
	// exporter: typed (permissively) ahead of its section in values.yaml,
	// which the exporter's branch adds.
	inSchema = slices.DeleteFunc(inSchema, func(k string) bool { return k == "exporter" && !slices.Contains(valuesKeys(t), k) })
	slices.Sort(inSchema)
	require.Equal(t, inSchema, valuesKeys(t), "values.schema.json and values.yaml")
}

func TestChartNames(t *testing.T) {
	for _, tc := range []struct {
		description string
		set         []string
		want        string // the device plugin's DaemonSet
	}{
		{"default", nil, "xpu-xpu-cdi-device-plugin"},
		{"nameOverride", []string{"nameOverride=kunlun"}, "xpu-kunlun-device-plugin"},
		{"fullnameOverride", []string{"fullnameOverride=kl"}, "kl-device-plugin"},
		{"both", []string{"fullnameOverride=kl", "nameOverride=kunlun"}, "kl-device-plugin"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			var args []string
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			r := render(t, args...)
			require.Equal(t, tc.want, r.daemonSets["xpu-device-plugin"].Name)
			require.Equal(t, strings.TrimSuffix(tc.want, "-device-plugin")+"-installer", r.daemonSets["xpu-cdi-installer"].Name)
			require.Equal(t, strings.TrimSuffix(tc.want, "-device-plugin")+"-validator", r.testPods[0].Name)
			r = render(t, append(args, draOn...)...)
			require.Equal(t, strings.TrimSuffix(tc.want, "-device-plugin")+"-dra-driver", r.daemonSets["xpu-dra-driver"].Name)
			require.Equal(t, r.serviceAccounts[0].Name, r.daemonSets["xpu-dra-driver"].Spec.Template.Spec.ServiceAccountName)
			require.Contains(t, r.policies[0].Spec.MatchConditions[0].Expression, ":"+r.serviceAccounts[0].Name+`"`)
		})
	}
}

// TestChartComponentScheduling: each component's nodeSelector,
// tolerations, priorityClassName and resources replace the top-level ones
// for it alone.
func TestChartComponentScheduling(t *testing.T) {
	r := render(t, "--set", "installer.nodeSelector.pool=a", "--set", "devicePlugin.tolerations[0].operator=Exists",
		"--set", "devicePlugin.priorityClassName=xpu", "--set", "resources.requests.cpu=50m", "--set", "installer.resources=null",
		"--set", "priorityClassName=")
	in, dp := r.daemonSets["xpu-cdi-installer"].Spec.Template.Spec, r.daemonSets["xpu-device-plugin"].Spec.Template.Spec
	require.Equal(t, map[string]string{"pool": "a"}, in.NodeSelector)
	require.Equal(t, map[string]string{"kubernetes.io/os": "linux"}, dp.NodeSelector)
	require.Equal(t, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, dp.Tolerations)
	require.Len(t, in.Tolerations, 2, "the top-level ones")
	require.Equal(t, "xpu", dp.PriorityClassName)
	require.Empty(t, in.PriorityClassName)
	require.Equal(t, "50m", in.Containers[0].Resources.Requests.Cpu().String(), "the top-level resources")
	require.Equal(t, "10m", dp.Containers[0].Resources.Requests.Cpu().String(), "its own")
}

// TestChartValidator: helm test's pod asks for one XPU the way the node
// offers it (a partition size when the installer keeps a layout; a claim
// under DRA, whose extended resource needs a feature gate before 1.36) and
// runs xpu-cdi check-container, copied into tests.image (glibc, for XRE 5's
// dynamically linked xpu-smi) or in the chart's image.
func TestChartValidator(t *testing.T) {
	set := func(v ...string) []string {
		var args []string
		for _, s := range v {
			args = append(args, "--set", s)
		}
		return args
	}
	for _, tc := range []struct {
		description string
		args        []string // of helm template
		resource    string   // "": a claim
	}{
		{"device plugin", nil, "baidu.com/xpu"},
		{"device plugin, another resource", set("devicePlugin.resourceName=kunlunxin.com/xpu"), "kunlunxin.com/xpu"},
		{"device plugin, P800 quarters", set("partitions.layout=all=4"), "baidu.com/xpu-24gb"},
		{"device plugin, P800 halves and a card in quarters", set("partitions.layout=0000:03:00.0=4\\,all=2"), "baidu.com/xpu-48gb"},
		{"device plugin, first entry without all", set("partitions.layout=3=3"), "baidu.com/xpu-5gb"},
		{"device plugin, whole cards", set("partitions.layout=all=0"), "baidu.com/xpu"},
		{"device plugin, partitions as one resource", set("partitions.layout=all=4", "devicePlugin.partitionStrategy=single"), "baidu.com/xpu"},
		{"device plugin, layout without the installer", set("partitions.layout=all=4", "installer.enabled=false"), "baidu.com/xpu"},
		{"device plugin, tests.resourceName", set("partitions.layout=all=2", "tests.resourceName=baidu.com/xpu-8gb"), "baidu.com/xpu-8gb"},
		{"device plugin, shared and renamed by default", set(
			"devicePlugin.config.version=v1", "devicePlugin.config.sharing.timeSlicing.renameByDefault=true",
			"devicePlugin.config.sharing.timeSlicing.resources[0].name=baidu.com/xpu",
			"devicePlugin.config.sharing.timeSlicing.resources[0].replicas=2"), "baidu.com/xpu.shared"},
		{"device plugin, a shared partition size renamed", set("partitions.layout=all=4",
			"devicePlugin.config.version=v1",
			"devicePlugin.config.sharing.timeSlicing.resources[0].name=baidu.com/xpu-24gb",
			"devicePlugin.config.sharing.timeSlicing.resources[0].rename=baidu.com/quarter",
			"devicePlugin.config.sharing.timeSlicing.resources[0].replicas=2"), "baidu.com/quarter"},
		{"DRA: a claim, not the class's extended resource", draOn, ""},
		{"DRA with partitions: a claim", append(set("partitions.layout=all=4"), draOn...), ""},
		{"DRA without extended resource: a claim", append(set("dra.deviceClasses.all.extendedResourceName="), draOn...), ""},
	} {
		t.Run(tc.description, func(t *testing.T) {
			r := render(t, tc.args...)
			require.Len(t, r.testPods, 1)
			pod := r.testPods[0]
			require.Equal(t, "test", pod.Annotations["helm.sh/hook"])
			require.Equal(t, corev1.RestartPolicyNever, pod.Spec.RestartPolicy)
			require.Empty(t, pod.Spec.PriorityClassName, "no node-critical priority for a test pod")
			require.Contains(t, pod.Spec.Tolerations, corev1.Toleration{Key: "baidu.com/xpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, "the nodes the chart serves")
			c := pod.Spec.Containers[0]
			require.Equal(t, "docker.io/library/debian:trixie-slim", c.Image, "glibc, for XRE 5's xpu-smi")
			require.Equal(t, []string{"/validator/xpu-cdi", "check-container", "--devices", "1"}, c.Command)
			require.Len(t, pod.Spec.InitContainers, 1)
			in := pod.Spec.InitContainers[0]
			require.Equal(t, "localhost/xpu-cdi:0.1.0", in.Image)
			require.Equal(t, []string{"/usr/bin/xpu-cdi", "check-container", "--copy-to", "/validator/xpu-cdi"}, in.Command)
			require.Empty(t, in.Resources.Limits[corev1.ResourceName(tc.resource)], "the init container holds no XPU")
			require.Empty(t, in.Resources.Claims)
			for _, cc := range []corev1.Container{c, in} {
				require.True(t, *cc.SecurityContext.ReadOnlyRootFilesystem)
				require.Equal(t, []corev1.Capability{"ALL"}, cc.SecurityContext.Capabilities.Drop)
			}
			require.True(t, c.VolumeMounts[0].ReadOnly)
			require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.Spec.SecurityContext.SeccompProfile.Type)
			if tc.resource != "" {
				var xpus []string
				for name := range c.Resources.Limits {
					if strings.Contains(string(name), "/") {
						xpus = append(xpus, string(name))
					}
				}
				require.Equal(t, []string{tc.resource}, xpus)
				q := c.Resources.Limits[corev1.ResourceName(tc.resource)]
				require.Equal(t, "1", q.String())
				require.Equal(t, "64Mi", c.Resources.Limits.Memory().String(), "tests.resources kept")
				require.Empty(t, r.claimTemplates)
				return
			}
			require.Empty(t, c.Resources.Limits[corev1.ResourceName("baidu.com/xpu")], "DRAExtendedResource is off by default before 1.36")
			// The validator's, and under DRA the exporter's (its device access).
			var tmpls []*resourceapi.ResourceClaimTemplate
			for _, ct := range r.claimTemplates {
				if ct.Labels["app.kubernetes.io/name"] != "xpu-exporter" {
					tmpls = append(tmpls, ct)
				}
			}
			require.Len(t, tmpls, 1)
			tmpl := tmpls[0]
			require.Equal(t, "test", tmpl.Annotations["helm.sh/hook"])
			require.Equal(t, "xpu.baidu.com", tmpl.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName)
			require.Equal(t, tmpl.Name, *pod.Spec.ResourceClaims[0].ResourceClaimTemplateName)
			require.Equal(t, []corev1.ResourceClaim{{Name: "xpu"}}, c.Resources.Claims)
		})
	}
	// A nodes-only spec has no xpu-smi; the chart's image (FROM scratch)
	// without tests.image.
	r := render(t, "--set", "installer.nodesOnly=true", "--set", "tests.image.repository=")
	pod := r.testPods[0].Spec
	require.Equal(t, []string{"/usr/bin/xpu-cdi", "check-container", "--devices", "1", "--no-xpu-smi"}, pod.Containers[0].Command)
	require.Equal(t, "localhost/xpu-cdi:0.1.0", pod.Containers[0].Image)
	require.Empty(t, pod.InitContainers)
	require.Empty(t, pod.Volumes)
}

// TestManifestsUpToDate: deployments/*.yaml are what make manifests
// renders from the chart now.
func TestManifestsUpToDate(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("../hack/manifests.sh", out)
	cmd.Env = append(os.Environ(), "HELM="+helm(t))
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	rendered, err := filepath.Glob(filepath.Join(out, "*.yaml"))
	require.NoError(t, err)
	require.Len(t, rendered, 3)
	for _, f := range rendered {
		want, err := os.ReadFile(f)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Base(f))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "deployments/%s is stale: run make manifests", filepath.Base(f))
	}
}

// valuesKeys returns the keys of values.yaml, walked as
// TestChartValuesDocumented walks them, sorted.
func valuesKeys(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(data, &values))
	var keys []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		if !ok || (len(m) == 0 && prefix != "") || isUserMap(prefix) {
			keys = append(keys, prefix)
			return
		}
		for k, sub := range m {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			walk(p, sub)
		}
	}
	walk("", values)
	slices.Sort(keys)
	return keys
}

// isUserMap: the value at key is one of userMaps.
func isUserMap(key string) bool {
	return key != "" && (slices.Contains(userMaps, key) || slices.Contains(userMaps, key[strings.LastIndex(key, ".")+1:]))
}
