package deployments

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/internal/labels"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

const chartDir = "helm/xpu-cdi"

// kubeVersion is the cluster helm renders for (a helm built from the module
// proxy does not know its default): the newest supported minor.
const kubeVersion = "1.37.2"

// helm returns the helm binary: the one make deps builds, else PATH's.
func helm(t *testing.T) string {
	t.Helper()
	return testreq.InstalledTool(t, "helm")
}

// rendered is the output of helm template, decoded strictly.
type rendered struct {
	daemonSets map[string]*appsv1.DaemonSet // by app.kubernetes.io/name
	configMaps []*corev1.ConfigMap
	// The DRA driver's objects.
	serviceAccounts []*corev1.ServiceAccount
	clusterRoles    []*rbacv1.ClusterRole
	roleBindings    []*rbacv1.ClusterRoleBinding
	policies        []*admissionv1.ValidatingAdmissionPolicy
	policyBindings  []*admissionv1.ValidatingAdmissionPolicyBinding
	deviceClasses   map[string]resourceapi.DeviceClass // by name
	// The exporter's Service and ServiceMonitor (the Prometheus operator's
	// type, not vendored: decoded as a map).
	services        []*corev1.Service
	serviceMonitors []map[string]any
	// helm test's objects.
	testPods       []*corev1.Pod
	claimTemplates []*resourceapi.ResourceClaimTemplate
}

// helmTemplate runs helm template on the chart (release xpu in xpu-system).
func helmTemplate(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(helm(t), append([]string{"template", "xpu", chartDir, "--namespace", "xpu-system", "--kube-version", kubeVersion}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template %v: %w: %s", args, err, stderr.String())
	}
	return out, nil
}

func render(t *testing.T, args ...string) *rendered {
	t.Helper()
	out, err := helmTemplate(t, args...)
	require.NoError(t, err)
	r := &rendered{daemonSets: map[string]*appsv1.DaemonSet{}, deviceClasses: map[string]resourceapi.DeviceClass{}}
	strict := func(i int, doc []byte, into any) {
		require.NoError(t, yaml.UnmarshalStrict(doc, into), "document %d:\n%s", i, doc)
	}
	for i, doc := range documents(out) {
		var tm metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal(doc, &tm), "document %d", i)
		switch tm.APIVersion + "/" + tm.Kind {
		case "apps/v1/DaemonSet":
			ds := &appsv1.DaemonSet{}
			require.NoError(t, yaml.UnmarshalStrict(doc, ds), "document %d:\n%s", i, doc)
			name := ds.Labels["app.kubernetes.io/name"]
			require.NotContains(t, r.daemonSets, name)
			r.daemonSets[name] = ds
		case "v1/ConfigMap":
			cm := &corev1.ConfigMap{}
			require.NoError(t, yaml.UnmarshalStrict(doc, cm), "document %d", i)
			r.configMaps = append(r.configMaps, cm)
		case "v1/ServiceAccount":
			o := &corev1.ServiceAccount{}
			strict(i, doc, o)
			r.serviceAccounts = append(r.serviceAccounts, o)
		case "rbac.authorization.k8s.io/v1/ClusterRole":
			o := &rbacv1.ClusterRole{}
			strict(i, doc, o)
			r.clusterRoles = append(r.clusterRoles, o)
		case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
			o := &rbacv1.ClusterRoleBinding{}
			strict(i, doc, o)
			r.roleBindings = append(r.roleBindings, o)
		case "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy":
			o := &admissionv1.ValidatingAdmissionPolicy{}
			strict(i, doc, o)
			r.policies = append(r.policies, o)
		case "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding":
			o := &admissionv1.ValidatingAdmissionPolicyBinding{}
			strict(i, doc, o)
			r.policyBindings = append(r.policyBindings, o)
		case "v1/Service":
			o := &corev1.Service{}
			strict(i, doc, o)
			r.services = append(r.services, o)
		case "monitoring.coreos.com/v1/ServiceMonitor":
			var o map[string]any
			strict(i, doc, &o)
			r.serviceMonitors = append(r.serviceMonitors, o)
		case "v1/Pod":
			o := &corev1.Pod{}
			strict(i, doc, o)
			r.testPods = append(r.testPods, o)
		case "resource.k8s.io/v1/ResourceClaimTemplate":
			o := &resourceapi.ResourceClaimTemplate{}
			strict(i, doc, o)
			r.claimTemplates = append(r.claimTemplates, o)
		case "resource.k8s.io/v1/DeviceClass":
			var o resourceapi.DeviceClass
			strict(i, doc, &o)
			require.NotContains(t, r.deviceClasses, o.Name)
			r.deviceClasses[o.Name] = o
		default:
			t.Fatalf("document %d: no decoder for %s %s: add one to this test", i, tm.APIVersion, tm.Kind)
		}
	}
	return r
}

// envNames returns the environment variables the flags of files read.
func envNames(t *testing.T, files ...string) []string {
	t.Helper()
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`EnvVars:\s*\[\]string\{([^}]*)\}`).FindAllStringSubmatch(string(data), -1) {
			for _, n := range strings.Split(m[1], ",") {
				names = append(names, strings.Trim(strings.TrimSpace(n), `"`))
			}
		}
	}
	return names
}

func env(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

// checkPod checks what every DaemonSet of the chart must have: the
// selector matches the template, node affinity ORs the labels, no
// privilege, a read-only root, every variable read by the binary.
func checkPod(t *testing.T, ds *appsv1.DaemonSet, reads []string) {
	t.Helper()
	require.Equal(t, "xpu-system", ds.Namespace)
	for k, v := range ds.Spec.Selector.MatchLabels {
		require.Equal(t, v, ds.Spec.Template.Labels[k], "%s: the selector must match the pod template", ds.Name)
	}
	pod := ds.Spec.Template.Spec
	if pod.ServiceAccountName == "" {
		require.NotNil(t, pod.AutomountServiceAccountToken)
		require.False(t, *pod.AutomountServiceAccountToken, "no API access")
	} else {
		require.True(t, pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken, "%s needs its account's token", ds.Name)
	}
	require.NotNil(t, pod.SecurityContext, "%s: no pod securityContext", ds.Name)
	require.Equal(t, corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}, *pod.SecurityContext.SeccompProfile, "%s: the runtime's default seccomp filter", ds.Name)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	if c.SecurityContext.Privileged != nil {
		// Only the exporter, whose xpu-smi opens the XPUs' nodes
		// (exporter.privileged; see TestChartExporter).
		require.Equal(t, "xpu-exporter", ds.Labels["app.kubernetes.io/name"], "%s is privileged", ds.Name)
	} else {
		require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
		require.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	}
	for _, e := range c.Env {
		require.Contains(t, reads, e.Name, "%s sets %s, which its binary does not read", ds.Name, e.Name)
	}
	volumes := map[string]bool{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = true
	}
	for _, m := range c.VolumeMounts {
		require.True(t, volumes[m.Name], "%s: mount %s has no volume", ds.Name, m.Name)
	}
	checkKubeletMounts(t, ds)
}

// checkKubeletMounts: of the kubelet's directories, the device plugin
// mounts only device-plugins, the DRA driver only plugins_registry and its
// own directory below plugins (and pod-resources with dynamic partitions),
// the exporter only pod-resources, the installer none (its / aside).
func checkKubeletMounts(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	var kubelet []string
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil && strings.Contains(v.HostPath.Path, "kubelet") {
			kubelet = append(kubelet, filepath.Base(v.HostPath.Path))
		}
	}
	e := env(ds.Spec.Template.Spec.Containers[0])
	switch ds.Labels["app.kubernetes.io/name"] {
	case "xpu-device-plugin":
		require.Equal(t, []string{"device-plugins"}, kubelet, ds.Name)
	case "xpu-dra-driver":
		want := []string{"plugins_registry", e["XPU_CDI_DRA_DRIVER_NAME"]}
		if e["XPU_CDI_PARTITIONS"] == "dynamic" {
			// The in-use check of a cut asks PodResources.
			want = append(want, "pod-resources")
		}
		require.Equal(t, want, kubelet, ds.Name)
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.HostPath != nil && filepath.Base(v.HostPath.Path) == "plugins_registry" {
				require.Equal(t, corev1.HostPathDirectory, *v.HostPath.Type, "the kubelet's registry: not created by the driver")
			}
		}
	case "xpu-exporter":
		require.Equal(t, []string{"pod-resources"}, kubelet, ds.Name)
	default:
		require.Empty(t, kubelet, ds.Name)
	}
}

// affinity returns the ORed node labels of the pod (key=value per term).
func affinity(ds *appsv1.DaemonSet) []string {
	a := ds.Spec.Template.Spec.Affinity
	if a == nil || a.NodeAffinity == nil {
		return nil
	}
	var out []string
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			out = append(out, e.Key+"="+strings.Join(e.Values, ","))
		}
	}
	sort.Strings(out)
	return out
}

func hostPaths(ds *appsv1.DaemonSet) map[string]string {
	pod := ds.Spec.Template.Spec
	byName := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			byName[v.Name] = v.HostPath.Path
		}
	}
	out := map[string]string{} // mount path -> host path
	for _, m := range pod.Containers[0].VolumeMounts {
		if p, ok := byName[m.Name]; ok {
			out[m.MountPath] = p
		}
	}
	return out
}

var (
	installerReads = func(t *testing.T) []string {
		// and, with partitions, the in-cluster API server (node.go)
		files := []string{"../internal/cli/install/install.go", "../internal/cli/install/partitions.go", "../cmd/xpu-cdi/main.go", "../internal/cmdflags/kind.go", "../internal/cmdflags/loglevel.go", "../internal/cmdflags/kubelet.go"}
		return append(envNames(t, files...), "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
	}
	pluginReads = func(t *testing.T) []string {
		return envNames(t, append([]string{"../cmd/xpu-device-plugin/main.go"}, daemonFlagGroups...)...)
	}
	exporterReads = func(t *testing.T) []string {
		return envNames(t, append([]string{"../cmd/xpu-exporter/main.go"}, daemonFlagGroups...)...)
	}
	draReads = func(t *testing.T) []string {
		// and client-go's in-cluster configuration
		files := append([]string{"../cmd/xpu-dra-driver/main.go", "../internal/cmdflags/kubeclient/kubeclient.go"}, daemonFlagGroups...)
		return append(envNames(t, files...), "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
	}
)

// readsOf returns the variables the binary of a DaemonSet of the chart reads.
func readsOf(t *testing.T, name string) []string {
	switch name {
	case "xpu-cdi-installer":
		return installerReads(t)
	case "xpu-dra-driver":
		return draReads(t)
	case "xpu-exporter":
		return exporterReads(t)
	}
	return pluginReads(t)
}

func TestChartDefault(t *testing.T) {
	r := render(t)
	require.Len(t, r.daemonSets, 3, "the installer, the device plugin and the exporter")
	require.Empty(t, r.configMaps, "no sharing by default")
	require.Empty(t, r.deviceClasses, "no DRA by default")
	require.Empty(t, r.clusterRoles)
	require.Empty(t, r.policies)
	in, dp := r.daemonSets["xpu-cdi-installer"], r.daemonSets["xpu-device-plugin"]
	require.NotNil(t, in)
	require.NotNil(t, dp)
	checkPod(t, in, installerReads(t))
	checkPod(t, dp, pluginReads(t))
	for _, ds := range []*appsv1.DaemonSet{in, dp} {
		require.Equal(t, []string{"baidu.com/xpu.present=true", "feature.node.kubernetes.io/pci-1d22.present=true"}, affinity(ds), ds.Name)
		require.Equal(t, map[string]string{"kubernetes.io/os": "linux"}, ds.Spec.Template.Spec.NodeSelector)
		require.Equal(t, "system-node-critical", ds.Spec.Template.Spec.PriorityClassName)
		require.Equal(t, "localhost/xpu-cdi:0.1.0", ds.Spec.Template.Spec.Containers[0].Image)
	}

	c := in.Spec.Template.Spec.Containers[0]
	require.Equal(t, []string{"/usr/bin/xpu-cdi", "install"}, c.Command)
	e := env(c)
	require.Equal(t, "/host", e["XPU_CDI_HOST_ROOT"])
	require.Equal(t, "/opt/xpu-cdi/bin", e["XPU_CDI_HOOK_DIR"])
	require.Equal(t, "/etc/cdi/baidu.com-xpu.yaml", e["XPU_CDI_OUTPUT"])
	require.Equal(t, "true", e["XPU_CDI_UNINSTALL_ON_EXIT"])
	require.Equal(t, "/etc/kubernetes/node-feature-discovery/features.d/xpu-cdi", e["XPU_CDI_LABELS_FILE"], "the installer writes the labels")
	require.NotContains(t, e, "XPU_CDI_CONFIG_FILE")
	require.NotContains(t, e, "XPU_CDI_PARTITION_LAYOUT", "the cards are left alone")
	require.NotContains(t, e, "XPU_CDI_PARTITION_NODE_LABEL")
	require.False(t, *in.Spec.Template.Spec.AutomountServiceAccountToken, "no token without partitions")
	require.Empty(t, in.Spec.Template.Spec.ServiceAccountName)
	require.Equal(t, map[string]string{"/host": "/"}, hostPaths(in))
	require.Equal(t, corev1.MountPropagationHostToContainer, *c.VolumeMounts[0].MountPropagation)

	c = dp.Spec.Template.Spec.Containers[0]
	e = env(c)
	require.Equal(t, "cdi-cri", e["XPU_CDI_DEVICE_LIST_STRATEGY"])
	require.Equal(t, "mixed", e["XPU_CDI_PARTITION_STRATEGY"])
	require.Equal(t, "/etc/cdi", e["XPU_CDI_SPEC_DIRS"], "the installer's spec")
	require.False(t, dp.Spec.Template.Spec.HostNetwork)
	require.NotContains(t, e, "XPU_CDI_LABELS_FILE", "one writer of the labels")
	require.Equal(t, map[string]string{
		"/var/lib/kubelet/device-plugins": "/var/lib/kubelet/device-plugins",
		"/host/dev":                       "/dev", "/host/proc": "/proc", "/host/sys": "/sys", "/etc/cdi": "/etc/cdi",
	}, hostPaths(dp))
	for _, m := range c.VolumeMounts {
		require.Equal(t, m.MountPath != "/var/lib/kubelet/device-plugins", m.ReadOnly, "%s: only the kubelet's directory is writable", m.MountPath)
	}
}

const sharingValues = `
devicePlugin:
  config:
    version: v1
    sharing:
      timeSlicing:
        renameByDefault: true
        failRequestsGreaterThanOne: true
        resources:
          - name: baidu.com/xpu
            replicas: 4
`

// TestChartLayoutRequestLabel: the chart's values and README name the layout
// request label the installer reads (labels.PartitionLayoutRequest, under
// node-restriction.kubernetes.io/, which a node's kubelet may not set) and
// say that the old name is still read.
func TestChartLayoutRequestLabel(t *testing.T) {
	for _, f := range []string{"values.yaml", "README.md", "templates/installer.yaml"} {
		data, err := os.ReadFile(filepath.Join(chartDir, f))
		require.NoError(t, err)
		text := strings.Join(strings.Fields(strings.ReplaceAll(string(data), "#", " ")), " ")
		require.Contains(t, text, labels.PartitionLayoutRequest, f)
		require.Contains(t, text, labels.PartitionLayout, f)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	require.NoError(t, err)
	require.Contains(t, string(readme), "Read the node label `"+labels.PartitionLayoutRequest+"`")
	require.Contains(t, string(readme), "The old label `"+labels.PartitionLayout+"` is still read when the new one is not set, with a warning")
}

// TestChartPartitions: partitions.layout or partitions.nodeLabel give the
// installer its layout, the node label, the node's name, the PodResources
// socket through /host, and a ServiceAccount (token mounted) bound to a
// ClusterRole that only gets Nodes; without them none of it is there.
func TestChartPartitions(t *testing.T) {
	for _, tc := range []struct {
		description string
		set         []string
		layout      string
	}{
		{"layout", []string{"partitions.layout=all=4"}, "all=4"},
		{"node label only", []string{"partitions.nodeLabel=true", "host.kubeletDir=/data/kubelet/", "installer.apiServer.host=127.0.0.1", "installer.apiServer.port=6443"}, ""},
	} {
		t.Run(tc.description, func(t *testing.T) {
			var args []string
			for _, v := range tc.set {
				args = append(args, "--set", v)
			}
			r := render(t, args...)
			in := r.daemonSets["xpu-cdi-installer"]
			require.NotNil(t, in)
			checkPod(t, in, installerReads(t))
			pod := in.Spec.Template.Spec
			c := pod.Containers[0]
			e := env(c)
			if tc.layout != "" {
				require.Equal(t, tc.layout, e["XPU_CDI_PARTITION_LAYOUT"])
				require.Equal(t, "/host/var/lib/kubelet/pod-resources/kubelet.sock", e["XPU_CDI_POD_RESOURCES_SOCKET"])
			} else {
				require.NotContains(t, e, "XPU_CDI_PARTITION_LAYOUT")
				require.Equal(t, "/host/data/kubelet/pod-resources/kubelet.sock", e["XPU_CDI_POD_RESOURCES_SOCKET"])
				require.Equal(t, "127.0.0.1", e["KUBERNETES_SERVICE_HOST"])
				require.Equal(t, "6443", e["KUBERNETES_SERVICE_PORT"])
			}
			require.Equal(t, "true", e["XPU_CDI_PARTITION_NODE_LABEL"])
			require.Equal(t, "30s", e["XPU_CDI_PARTITION_LABEL_INTERVAL"])
			require.Equal(t, "baidu.com/xpu", e["XPU_CDI_RESOURCE_NAME"], "the in-use check's resources")
			require.Equal(t, "xpu.baidu.com", e["XPU_CDI_DRA_DRIVER_NAME"], "the in-use check's claims")
			var nodeName *corev1.EnvVar
			for i := range c.Env {
				if c.Env[i].Name == "XPU_CDI_NODE_NAME" {
					nodeName = &c.Env[i]
				}
			}
			require.NotNil(t, nodeName)
			require.Equal(t, "spec.nodeName", nodeName.ValueFrom.FieldRef.FieldPath)
			require.Nil(t, pod.AutomountServiceAccountToken, "the token is mounted")
			require.Equal(t, []string{"ALL"}, capabilities(c), "sriov_numvfs needs no capability")
			// The in-use check reads other users' /proc/PID/fd.
			require.Equal(t, []corev1.Capability{"SYS_PTRACE", "DAC_READ_SEARCH"}, c.SecurityContext.Capabilities.Add)
			require.Equal(t, corev1.AppArmorProfileTypeUnconfined, c.SecurityContext.AppArmorProfile.Type)

			require.Len(t, r.serviceAccounts, 1)
			require.Equal(t, r.serviceAccounts[0].Name, pod.ServiceAccountName)
			require.Len(t, r.clusterRoles, 1)
			require.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}}, r.clusterRoles[0].Rules)
			require.Len(t, r.roleBindings, 1)
			b := r.roleBindings[0]
			require.Equal(t, r.clusterRoles[0].Name, b.RoleRef.Name)
			require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: pod.ServiceAccountName, Namespace: "xpu-system"}}, b.Subjects)
		})
	}

	// Without the labels the resource name is still passed, once.
	r := render(t, "--set", "partitions.layout=all=2", "--set", "labels.enabled=false", "--set", "devicePlugin.resourceName=kunlunxin.com/xpu")
	checkPod(t, r.daemonSets["xpu-cdi-installer"], installerReads(t))
	require.Equal(t, "kunlunxin.com/xpu", env(r.daemonSets["xpu-cdi-installer"].Spec.Template.Spec.Containers[0])["XPU_CDI_RESOURCE_NAME"])

	// Without partitions the installer keeps no capability.
	def := render(t).daemonSets["xpu-cdi-installer"].Spec.Template.Spec.Containers[0]
	require.Empty(t, def.SecurityContext.Capabilities.Add)
	require.Nil(t, def.SecurityContext.AppArmorProfile)

	// The installer off: nothing of it, whatever partitions says.
	r = render(t, "--set", "partitions.layout=all=2", "--set", "installer.enabled=false")
	require.NotContains(t, r.daemonSets, "xpu-cdi-installer")
	require.Empty(t, r.clusterRoles)
	require.Empty(t, r.serviceAccounts)

	// A layout the schema does not take is refused by name.
	_, err := helmTemplate(t, "--set", "partitions.layout=all-2")
	require.ErrorContains(t, err, "/partitions/layout")
}

// capabilities are the capabilities container c drops.
func capabilities(c corev1.Container) []string {
	var out []string
	if sc := c.SecurityContext; sc != nil && sc.Capabilities != nil {
		for _, d := range sc.Capabilities.Drop {
			out = append(out, string(d))
		}
	}
	return out
}

func TestChartSharing(t *testing.T) {
	values := filepath.Join(t.TempDir(), "sharing.yaml")
	require.NoError(t, os.WriteFile(values, []byte(sharingValues), 0o644))
	r := render(t, "-f", values)
	require.Len(t, r.configMaps, 1)
	cm := r.configMaps[0]
	// The ConfigMap is what the plugin reads: its own parser accepts it.
	c, err := sharing.Parse([]byte(cm.Data["config.yaml"]), "baidu.com/xpu")
	require.NoError(t, err)
	require.Equal(t, sharing.Config{Replicas: 4, ResourceName: "baidu.com/xpu.shared", FailRequestsGreaterThanOne: true}, c)
	// The exporter's attribution and the installer's in-use check count
	// the names the plugin renames its resources to: they read its file.
	withPartitions := render(t, "-f", values, "--set", "labels.enabled=false", "--set", "partitions.nodeLabel=true")
	for _, tc := range []struct {
		r    *rendered
		name string
	}{
		{r, "xpu-device-plugin"},
		{r, "xpu-cdi-installer"},
		{r, "xpu-exporter"},
		{withPartitions, "xpu-cdi-installer"},
	} {
		name := tc.name
		ds := tc.r.daemonSets[name]
		e := env(ds.Spec.Template.Spec.Containers[0])
		require.Equal(t, "/etc/xpu-cdi/config.yaml", e["XPU_CDI_CONFIG_FILE"], name)
		require.NotEmpty(t, ds.Spec.Template.Annotations["xpu-cdi/config-checksum"], "%s restarts when the config changes", name)
		var found bool
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.ConfigMap != nil {
				require.Equal(t, cm.Name, v.ConfigMap.Name)
				found = true
			}
		}
		require.True(t, found, name)
		mounted := false
		for _, m := range ds.Spec.Template.Spec.Containers[0].VolumeMounts {
			mounted = mounted || m.MountPath == "/etc/xpu-cdi"
		}
		require.True(t, mounted, "%s mounts the config at /etc/xpu-cdi", name)
	}
	// Without sharing, none of them has the file.
	plain := render(t, "--set", "partitions.nodeLabel=true")
	for name, ds := range plain.daemonSets {
		require.NotContains(t, env(ds.Spec.Template.Spec.Containers[0]), "XPU_CDI_CONFIG_FILE", name)
	}

	// A config the plugin would refuse (its parser names the key) is
	// refused at install, naming the key too.
	_, err = sharing.Parse([]byte("version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: baidu.com/xpu\n        replica: 4\n"), "baidu.com/xpu")
	require.ErrorContains(t, err, "unknown key sharing.timeSlicing.resources[0].replica", "the plugin refuses it")
	bad := []byte(strings.Replace(sharingValues, "replicas: 4", "replica: 4", 1))
	badFile := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(badFile, bad, 0o644))
	_, err = helmTemplate(t, "-f", badFile)
	require.ErrorContains(t, err, "additional properties 'replica' not allowed")
}

func TestChartOptions(t *testing.T) {
	for _, tc := range []struct {
		description string
		set         []string
		check       func(t *testing.T, r *rendered)
	}{
		{"installer off: host packages write the spec; the plugin writes the labels", []string{"installer.enabled=false"}, func(t *testing.T, r *rendered) {
			require.NotContains(t, r.daemonSets, "xpu-cdi-installer")
			dp := r.daemonSets["xpu-device-plugin"]
			e := env(dp.Spec.Template.Spec.Containers[0])
			require.Equal(t, "/etc/cdi,/var/run/cdi", e["XPU_CDI_SPEC_DIRS"])
			require.Equal(t, "/etc/kubernetes/node-feature-discovery/features.d/xpu-cdi", e["XPU_CDI_LABELS_FILE"])
			require.Equal(t, "true", e["XPU_CDI_REMOVE_LABELS_ON_EXIT"])
			hp := hostPaths(dp)
			require.Equal(t, "/etc/cdi", hp["/etc/cdi"])
			require.Equal(t, "/etc/kubernetes/node-feature-discovery/features.d", hp["/etc/kubernetes/node-feature-discovery/features.d"])
		}},
		{"device plugin off", []string{"devicePlugin.enabled=false"}, func(t *testing.T, r *rendered) {
			require.NotContains(t, r.daemonSets, "xpu-device-plugin")
			require.Contains(t, r.daemonSets, "xpu-cdi-installer")
		}},
		{"labels off", []string{"labels.enabled=false", "installer.enabled=false"}, func(t *testing.T, r *rendered) {
			require.NotContains(t, env(r.daemonSets["xpu-device-plugin"].Spec.Template.Spec.Containers[0]), "XPU_CDI_LABELS_FILE")
		}},
		{"labels off with the installer", []string{"labels.enabled=false"}, func(t *testing.T, r *rendered) {
			require.NotContains(t, env(r.daemonSets["xpu-cdi-installer"].Spec.Template.Spec.Containers[0]), "XPU_CDI_LABELS_FILE")
		}},
		{"another labels file", []string{"labels.featuresDir=/etc/nfd/features.d/", "labels.fileName=kunlun"}, func(t *testing.T, r *rendered) {
			require.Equal(t, "/etc/nfd/features.d/kunlun", env(r.daemonSets["xpu-cdi-installer"].Spec.Template.Spec.Containers[0])["XPU_CDI_LABELS_FILE"])
		}},
		{"installer settings", []string{
			"installer.hookDir=/usr/local/lib/xpu", "cdi.specFile=/etc/cdi/xpu.json", "installer.interval=30s",
			"installer.deviceNameStrategies={index,bdf}", "installer.nodesOnly=true", "installer.uninstallOnExit=false", "logLevel=debug", "installer.mountPropagation=",
		}, func(t *testing.T, r *rendered) {
			e := env(r.daemonSets["xpu-cdi-installer"].Spec.Template.Spec.Containers[0])
			require.Equal(t, "/usr/local/lib/xpu", e["XPU_CDI_HOOK_DIR"])
			require.Equal(t, "/etc/cdi/xpu.json", e["XPU_CDI_OUTPUT"])
			require.Equal(t, "30s", e["XPU_CDI_INTERVAL"])
			require.Equal(t, "index,bdf", e["XPU_CDI_DEVICE_NAME_STRATEGY"])
			require.Equal(t, "true", e["XPU_CDI_NODES_ONLY"])
			require.Equal(t, "false", e["XPU_CDI_UNINSTALL_ON_EXIT"])
			require.Equal(t, "debug", e["XPU_CDI_LOG_LEVEL"])
			require.Nil(t, r.daemonSets["xpu-cdi-installer"].Spec.Template.Spec.Containers[0].VolumeMounts[0].MountPropagation)
			dp := r.daemonSets["xpu-device-plugin"]
			require.Equal(t, "/etc/cdi", env(dp.Spec.Template.Spec.Containers[0])["XPU_CDI_SPEC_DIRS"], "the plugin checks the installer's spec directory")
			require.Equal(t, "/etc/cdi", hostPaths(dp)["/etc/cdi"])
		}},
		{"driver in a tree of its own, host network", []string{"host.devRoot=/run/kunlun/driver", "host.driverRoot=/run/kunlun/driver", "hostNetwork=true"}, func(t *testing.T, r *rendered) {
			e := env(r.daemonSets["xpu-cdi-installer"].Spec.Template.Spec.Containers[0])
			require.Equal(t, "/run/kunlun/driver", e["XPU_CDI_DEV_ROOT"])
			require.Equal(t, "/run/kunlun/driver", e["XPU_CDI_DRIVER_ROOT"])
			hp := hostPaths(r.daemonSets["xpu-device-plugin"])
			require.Equal(t, "/run/kunlun/driver/dev", hp["/host/dev"], "the plugin reads the devices the spec names")
			require.Equal(t, "/run/kunlun/driver/sys", hp["/host/sys"])
			for _, ds := range r.daemonSets {
				require.True(t, ds.Spec.Template.Spec.HostNetwork)
			}
		}},
		{"device plugin settings", []string{
			"devicePlugin.resourceName=kunlunxin.com/xpu", "devicePlugin.deviceListStrategy=cdi-annotations", "devicePlugin.partitionStrategy=single",
			"devicePlugin.healthCheckInterval=5s", "cdi.vendor=example.com", "cdi.class=npu", "host.kubeletDir=/data/kubelet",
		}, func(t *testing.T, r *rendered) {
			dp := r.daemonSets["xpu-device-plugin"]
			e := env(dp.Spec.Template.Spec.Containers[0])
			require.Equal(t, "kunlunxin.com/xpu", e["XPU_CDI_RESOURCE_NAME"])
			require.Equal(t, "cdi-annotations", e["XPU_CDI_DEVICE_LIST_STRATEGY"])
			require.Equal(t, "single", e["XPU_CDI_PARTITION_STRATEGY"])
			require.Equal(t, "5s", e["XPU_CDI_POLL_INTERVAL"])
			require.Equal(t, "example.com", e["XPU_CDI_VENDOR"])
			require.Equal(t, "npu", e["XPU_CDI_CLASS"])
			require.Equal(t, "/data/kubelet/device-plugins", hostPaths(dp)["/data/kubelet/device-plugins"])
			require.Equal(t, "example.com", env(r.daemonSets["xpu-cdi-installer"].Spec.Template.Spec.Containers[0])["XPU_CDI_VENDOR"], "the spec of the kind handed out")
		}},
		{"image", []string{"image.repository=registry.example.com/xpu-cdi", "image.tag=1.2.3", "image.pullPolicy=Always", "imagePullSecrets[0].name=regcred"}, func(t *testing.T, r *rendered) {
			for _, ds := range r.daemonSets {
				pod := ds.Spec.Template.Spec
				require.Equal(t, "registry.example.com/xpu-cdi:1.2.3", pod.Containers[0].Image)
				require.Equal(t, corev1.PullAlways, pod.Containers[0].ImagePullPolicy)
				require.Equal(t, []corev1.LocalObjectReference{{Name: "regcred"}}, pod.ImagePullSecrets)
			}
		}},
		{"node selection", []string{"nodeAffinityLabels=null", "nodeSelector.pool=xpu", "tolerations=null", "priorityClassName="}, func(t *testing.T, r *rendered) {
			for _, ds := range r.daemonSets {
				pod := ds.Spec.Template.Spec
				require.Nil(t, affinity(ds))
				require.Equal(t, "xpu", pod.NodeSelector["pool"])
				require.Empty(t, pod.Tolerations)
				require.Empty(t, pod.PriorityClassName)
			}
		}},
		{"resources", []string{"installer.resources.limits.memory=64Mi", "devicePlugin.resources=null"}, func(t *testing.T, r *rendered) {
			require.Equal(t, "64Mi", r.daemonSets["xpu-cdi-installer"].Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String())
			require.Empty(t, r.daemonSets["xpu-device-plugin"].Spec.Template.Spec.Containers[0].Resources.Limits)
		}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			var args []string
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			r := render(t, args...)
			for name, ds := range r.daemonSets {
				checkPod(t, ds, readsOf(t, name))
			}
			tc.check(t, r)
		})
	}
}

func TestChartLint(t *testing.T) {
	values := filepath.Join(t.TempDir(), "sharing.yaml")
	require.NoError(t, os.WriteFile(values, []byte(sharingValues), 0o644))
	for _, args := range [][]string{{}, {"-f", values}, {"--set", "installer.enabled=false"}, {"--set", "dra.enabled=true,devicePlugin.enabled=false"}, {"--set", "dra.enabled=true,devicePlugin.enabled=false,dra.partitions.mode=dynamic,dra.partitions.idleLayout=whole"}} {
		out, err := exec.Command(helm(t), append([]string{"lint", "--strict", "--kube-version", kubeVersion, chartDir}, args...)...).CombinedOutput()
		require.NoError(t, err, "helm lint %v:\n%s", args, out)
	}
}

// userMaps are the values that hold maps of the user's own (labels,
// resources, the sharing config, the exporter's section until it is
// typed), by key or by last component: documented and typed as one key.
var userMaps = []string{"nodeAffinityLabels", "nodeSelector", "resources", "devicePlugin.config", "exporter.serviceMonitor.labels"}

// TestChartValuesDocumented: every key of values.yaml is in the chart's
// README table.
func TestChartValuesDocumented(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	require.NoError(t, err)
	keys := valuesKeys(t)
	require.NotEmpty(t, keys)
	for _, k := range keys {
		require.Contains(t, string(readme), "`"+k+"`", "values.yaml key %s is not in the README's table", k)
	}
	// And the table has no row for a key values.yaml lacks.
	_, table, ok := strings.Cut(string(readme), "\n## Values\n")
	require.True(t, ok, "the README has no Values section")
	table, _, _ = strings.Cut(table, "\n## ")
	rows := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(table, -1)
	require.NotEmpty(t, rows)
	for _, row := range rows {
		require.Contains(t, keys, row[1], "the README's table documents %s, which values.yaml does not have", row[1])
	}
}

// TestChartRefusesWhatBinariesRefuse: values a daemon would refuse at its
// start (its flag validation, the sharing configuration's parser) fail
// helm template, as they fail helm install, naming the value, rather than
// leaving a pod crash-looping; the values next to each limit pass.
func TestChartRefusesWhatBinariesRefuse(t *testing.T) {
	const draSet = "dra.enabled=true,devicePlugin.enabled=false"
	sharing := func(v ...string) []string {
		out := []string{"devicePlugin.config.version=v1", "devicePlugin.config.sharing.timeSlicing.resources[0].name=baidu.com/xpu"}
		return append(out, v...)
	}
	for _, tc := range []struct {
		description string
		set         []string
		want        string // "": accepted
	}{
		{"replicas beyond the plugin's 64", sharing("devicePlugin.config.sharing.timeSlicing.resources[0].replicas=100"), "/devicePlugin/config/sharing/timeSlicing/resources/0/replicas"},
		{"replicas 64", sharing("devicePlugin.config.sharing.timeSlicing.resources[0].replicas=64"), ""},
		{"replicas 0", sharing("devicePlugin.config.sharing.timeSlicing.resources[0].replicas=0"), "/devicePlugin/config/sharing/timeSlicing/resources/0/replicas"},
		{"replicas missing", sharing(), "replicas"},
		{"sharing version v2", []string{"devicePlugin.config.version=v2"}, "/devicePlugin/config/version"},
		{"sharing without a version", []string{"devicePlugin.config.sharing.timeSlicing.renameByDefault=true"}, "version"},
		{"MPS", []string{"devicePlugin.config.version=v1", "devicePlugin.config.sharing.mps.renameByDefault=true"}, "mps"},
		{"flags in the sharing file", []string{"devicePlugin.config.version=v1", "devicePlugin.config.flags.migStrategy=none"}, "flags"},
		{"a selection of devices", sharing("devicePlugin.config.sharing.timeSlicing.resources[0].replicas=2", "devicePlugin.config.sharing.timeSlicing.resources[0].devices={0}"), "/devicePlugin/config/sharing/timeSlicing/resources/0/devices"},
		{"a resource not the plugin's", []string{"devicePlugin.config.version=v1", "devicePlugin.config.sharing.timeSlicing.resources[0].name=nvidia.com/gpu", "devicePlugin.config.sharing.timeSlicing.resources[0].replicas=2"}, "devicePlugin.config.sharing.timeSlicing.resources[0].name=nvidia.com/gpu is not devicePlugin.resourceName (baidu.com/xpu)"},
		{"a partition size of the plugin's", []string{"devicePlugin.config.version=v1", "devicePlugin.config.sharing.timeSlicing.resources[0].name=baidu.com/xpu-24gb", "devicePlugin.config.sharing.timeSlicing.resources[0].replicas=2"}, ""},
		{"a resource named twice", sharing("devicePlugin.config.sharing.timeSlicing.resources[0].replicas=2", "devicePlugin.config.sharing.timeSlicing.resources[1].name=baidu.com/xpu", "devicePlugin.config.sharing.timeSlicing.resources[1].replicas=3"), "devicePlugin.config.sharing.timeSlicing.resources[1].name=baidu.com/xpu: named twice"},
		{"renamed onto a partition size", sharing("devicePlugin.config.sharing.timeSlicing.resources[0].replicas=2", "devicePlugin.config.sharing.timeSlicing.resources[0].rename=baidu.com/xpu-48gb"), "baidu.com/xpu is renamed baidu.com/xpu-48gb, the name of another resource"},
		{"healthCheckInterval 0s", []string{"devicePlugin.healthCheckInterval=0s"}, "devicePlugin.healthCheckInterval=0s is too short: xpu-device-plugin --poll-interval refuses less than 100ms"},
		{"healthCheckInterval 100ms", []string{"devicePlugin.healthCheckInterval=100ms"}, ""},
		{"healthCheckInterval 0.05s", []string{"devicePlugin.healthCheckInterval=0.05s"}, "devicePlugin.healthCheckInterval=0.05s is too short"},
		{"DRA poll 90ms", append([]string{"dra.healthCheckInterval=90ms"}, strings.Split(draSet, ",")...), "dra.healthCheckInterval=90ms is too short: xpu-dra-driver --poll-interval"},
		{"installer interval 1m", []string{"installer.interval=1m"}, ""},
		{"installer interval 99ms", []string{"installer.interval=99ms"}, "installer.interval=99ms is too short: xpu-cdi install --interval"},
		{"installer off: its interval unused", []string{"installer.enabled=false", "installer.interval=0s"}, ""},
		{"label interval 10ms", []string{"partitions.nodeLabel=true", "partitions.labelInterval=10ms"}, "partitions.labelInterval=10ms is too short"},
		{"xpu-smi timeout 5ms", []string{"exporter.xpuSMITimeout=5ms"}, "exporter.xpuSMITimeout=5ms is too short: xpu-exporter --xpu-smi-timeout refuses less than 10ms"},
		{"layout with an unknown selector", []string{"partitions.layout=gpu0=2"}, "/partitions/layout"},
		{"layout beyond 256 VFs", []string{"partitions.layout=all=300"}, `partitions.layout=all=300: "all=300" is more VFs than any SR-IOV card has`},
		{"layout by address and index", []string{`partitions.layout=0000:3B:00.0=4\,1=2\,ALL=0`}, ""},
		{"named layouts", []string{"partitions.layouts.halves=all=2", `partitions.layouts.mixed=all=2\,0000:3b:00.0=4`}, ""},
		{"a layout name a label value cannot hold", []string{"partitions.layouts._x=all=2"}, "additional properties '_x' not allowed"},
		{"a layout name over 58 characters", []string{"partitions.layouts." + strings.Repeat("x", 59) + "=all=2"}, "not allowed"},
		{"a named layout in label form", []string{"partitions.layouts.halves=all-2"}, "/partitions/layouts/halves"},
		{"a named layout beyond 256 VFs", []string{"partitions.layouts.big=all=300"}, `partitions.layouts.big=all=300: "all=300" is more VFs than any SR-IOV card has`},
		{"a resource name in kubernetes.io", []string{"devicePlugin.resourceName=kubernetes.io/xpu"}, "devicePlugin.resourceName=kubernetes.io/xpu: the kubernetes.io domain is reserved"},
		{"a resource name the kubelet refuses", []string{"devicePlugin.resourceName=Baidu.com/xpu"}, "/devicePlugin/resourceName"},
		{"an extended resource name the kubelet refuses", append([]string{"dra.deviceClasses.all.extendedResourceName=xpu"}, strings.Split(draSet, ",")...), "/dra/deviceClasses/all/extendedResourceName"},
		{"a driver name beyond 63 characters", append([]string{"dra.driverName=" + strings.Repeat("x", 60) + ".baidu.com"}, strings.Split(draSet, ",")...), "/dra/driverName"},
		{"API server port 70000", []string{"installer.apiServer.port=70000"}, "/installer/apiServer/port"},
		{"DRA on Kubernetes 1.33", append([]string{"--kube-version=1.33.4"}, strings.Split(draSet, ",")...), "dra.enabled: the cluster (Kubernetes v1.33.4) does not serve resource.k8s.io/v1"},
		// Dynamic partitions: the DRA driver cuts the cards, alone. The
		// schema refuses each combination naming the key; where its
		// validation is skipped, the chart says why.
		{"a partition mode the driver lacks", append([]string{"dra.partitions.mode=mig"}, strings.Split(draSet, ",")...), "at '/dra/partitions/mode': value must be one of 'static', 'dynamic'"},
		{"an idle layout the driver lacks", append([]string{"dra.partitions.mode=dynamic", "dra.partitions.idleLayout=half"}, strings.Split(draSet, ",")...), "at '/dra/partitions/idleLayout': value must be one of 'keep', 'whole'"},
		{"dynamic", append([]string{"dra.partitions.mode=dynamic"}, strings.Split(draSet, ",")...), ""},
		{"dynamic, idle cards whole", append([]string{"dra.partitions.mode=dynamic", "dra.partitions.idleLayout=whole"}, strings.Split(draSet, ",")...), ""},
		{"dynamic without DRA", []string{"dra.partitions.mode=dynamic"}, "at '/dra/enabled': value must be true"},
		{"dynamic without DRA, schema skipped", []string{"--skip-schema-validation", "dra.partitions.mode=dynamic"}, "dra.partitions.mode=dynamic without dra.enabled: dynamic partitions are cut by the DRA driver"},
		{"dynamic with a layout", append([]string{"dra.partitions.mode=dynamic", "partitions.layout=all=2"}, strings.Split(draSet, ",")...), "at '/partitions/layout': value must be ''"},
		{"dynamic with named layouts", append([]string{"dra.partitions.mode=dynamic", "partitions.layouts.halves=all=2"}, strings.Split(draSet, ",")...), "at '/partitions/layouts': maxProperties"},
		{"dynamic with the node label", append([]string{"dra.partitions.mode=dynamic", "partitions.nodeLabel=true"}, strings.Split(draSet, ",")...), "at '/partitions/nodeLabel': value must be false"},
		{"dynamic with a layout, schema skipped", append([]string{"--skip-schema-validation", "dra.partitions.mode=dynamic", "partitions.layout=all=2"}, strings.Split(draSet, ",")...), "dra.partitions.mode=dynamic with partitions.layout, partitions.layouts or partitions.nodeLabel: the DRA driver cuts each card"},
		{"dynamic with the node label, schema skipped", append([]string{"--skip-schema-validation", "dra.partitions.mode=dynamic", "partitions.nodeLabel=true"}, strings.Split(draSet, ",")...), "and the installer's static layout would cut the same cards"},
		{"a layout, the installer off, dynamic", append([]string{"dra.partitions.mode=dynamic", "partitions.layout=all=2", "installer.enabled=false"}, strings.Split(draSet, ",")...), "at '/partitions/layout': value must be ''"},
		{"idle cards whole in static mode", append([]string{"dra.partitions.idleLayout=whole"}, strings.Split(draSet, ",")...), "at '/dra/partitions/idleLayout': value must be 'keep'"},
		{"idle cards whole in static mode, schema skipped", append([]string{"--skip-schema-validation", "dra.partitions.idleLayout=whole"}, strings.Split(draSet, ",")...), "dra.partitions.idleLayout=whole with dra.partitions.mode=static: the idle layout is what the DRA driver does with a card it cut"},
		{"dynamic with a spec that lacks PCI-address names", append([]string{"dra.partitions.mode=dynamic", "installer.deviceNameStrategies={index,serial}"}, strings.Split(draSet, ",")...), "installer.deviceNameStrategies=index,serial with dra.partitions.mode=dynamic: the DRA driver answers a prepared claim with the CDI name of the VF's PCI address"},
		{"dynamic with PCI-address names", append([]string{"dra.partitions.mode=dynamic", "installer.deviceNameStrategies={bdf}"}, strings.Split(draSet, ",")...), ""},
		{"dynamic with the exporter's admin-access claim", append([]string{"dra.partitions.mode=dynamic", "exporter.adminAccessClaim=true"}, strings.Split(draSet, ",")...), "exporter.adminAccessClaim=true with partitions.layout, partitions.nodeLabel or dra.partitions.mode=dynamic"},
		{"device plugin on Kubernetes 1.33", []string{"--kube-version=1.33.4"}, ""},
	} {
		t.Run(tc.description, func(t *testing.T) {
			var args []string
			for _, v := range tc.set {
				if strings.HasPrefix(v, "--") {
					args = append(args, v)
					continue
				}
				args = append(args, "--set", v)
			}
			_, err := helmTemplate(t, args...)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err, "helm template accepted %v", tc.set)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestChartNotes: NOTES.txt names the release's resource, the exporter,
// the partitions and every DeviceClass it installs.
func TestChartNotes(t *testing.T) {
	// helm template leaves NOTES.txt out and helm install --dry-run takes
	// no --kube-version: render a copy of the chart with a template that
	// holds the notes, rendered (tpl), as a YAML string.
	chart := filepath.Join(t.TempDir(), "xpu-cdi")
	require.NoError(t, os.CopyFS(chart, os.DirFS(chartDir)))
	require.NoError(t, os.Rename(filepath.Join(chart, "templates", "NOTES.txt"), filepath.Join(chart, "notes.txt")))
	require.NoError(t, os.WriteFile(filepath.Join(chart, "templates", "notes.yaml"), []byte("notes: |\n{{ tpl (.Files.Get \"notes.txt\") . | indent 2 }}\n"), 0o644))
	notes := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(helm(t), append([]string{"template", "xpu", chart, "--namespace", "xpu-system", "--kube-version", kubeVersion, "--show-only", "templates/notes.yaml"}, args...)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		var doc struct{ Notes string }
		_, body, _ := strings.Cut(string(out), "\n")
		require.NoError(t, yaml.Unmarshal([]byte(body), &doc), "%s", out)
		return doc.Notes
	}
	n := notes("--set", "devicePlugin.resourceName=kunlunxin.com/xpu", "--set", "partitions.layout=all=2")
	require.Contains(t, n, "The device plugin advertises kunlunxin.com/xpu (partitions as kunlunxin.com/xpu-<size>, e.g. kunlunxin.com/xpu-24gb)")
	require.Contains(t, n, `XPU:.status.allocatable.kunlunxin\.com/xpu`)
	require.NotContains(t, n, "baidu.com/xpu ")
	require.Contains(t, n, "Partitions: the installer lays the cards out as all=2")
	require.Contains(t, n, "The exporter serves each node's XPU metrics on port 9507 (Service xpu-xpu-cdi-exporter")
	n = notes("--set", "dra.enabled=true", "--set", "devicePlugin.enabled=false", "--set", "exporter.enabled=false")
	require.Contains(t, n, "claims name a DeviceClass: xpu.baidu.com (also serves baidu.com/xpu where the DRAExtendedResource gate is on")
	require.Contains(t, n, "kunlun1/kunlun2/kunlun3.xpu.baidu.com; partitions xpu-48gb.baidu.com, xpu-24gb.baidu.com, xpu-16gb.baidu.com, xpu-8gb.baidu.com, xpu-5gb.baidu.com.")
	require.NotContains(t, n, "exporter")
	require.NotContains(t, n, "Partitions:")
	require.Contains(t, n, "Validate (a pod asking for one XPU through a ResourceClaim)")
	require.NotContains(t, n, "Dynamic partitions")
	n = notes("--set", "dra.enabled=true", "--set", "devicePlugin.enabled=false", "--set", "dra.partitions.mode=dynamic")
	require.Contains(t, n, "Dynamic partitions: the DRA driver offers every way each SR-IOV card may be cut (xpu-N whole, xpu-N-hS halves, xpu-N-qS quarters)")
	require.Contains(t, n, "an idle card keeps its VFs for the next claim of that size")
	require.Contains(t, n, "kube-apiserver and kube-scheduler need --feature-gates=DRADeviceCompatibilityGroups=true")
	require.NotContains(t, n, "Partitions: the installer")
	n = notes("--set", "dra.enabled=true", "--set", "devicePlugin.enabled=false", "--set", "dra.partitions.mode=dynamic", "--set", "dra.partitions.idleLayout=whole")
	require.Contains(t, n, "an idle card goes back to whole")
}

// TestChartPartitionLayouts: partitions.layouts becomes the installer's
// file of named layouts (a ConfigMap in the form partition apply --config
// reads, mounted read-only, --partition-config), turns the node label on,
// and restarts the installer when it changes (it is read at start).
func TestChartPartitionLayouts(t *testing.T) {
	r := render(t, "--set", "partitions.layouts.halves=all=2", "--set", `partitions.layouts.mixed=all=2\,0000:3b:00.0=4`)
	in := r.daemonSets["xpu-cdi-installer"]
	require.NotNil(t, in)
	checkPod(t, in, installerReads(t))
	pod := in.Spec.Template.Spec
	c := pod.Containers[0]
	e := env(c)
	require.Equal(t, "true", e["XPU_CDI_PARTITION_NODE_LABEL"], "only the node label names a layout")
	require.NotContains(t, e, "XPU_CDI_PARTITION_LAYOUT")
	file := e["XPU_CDI_PARTITION_CONFIG"]
	require.Equal(t, "/etc/xpu-cdi-partitions/layouts.conf", file)
	var cm *corev1.ConfigMap
	for _, m := range r.configMaps {
		if strings.HasSuffix(m.Name, "-partition-layouts") {
			cm = m
		}
	}
	require.NotNil(t, cm)
	layouts, err := partition.ParseConfig([]byte(cm.Data[filepath.Base(file)]))
	require.NoError(t, err)
	require.Equal(t, []string{"halves", "mixed"}, layouts.Names)
	mixed, err := layouts.Layout("mixed")
	require.NoError(t, err)
	require.Equal(t, "all=2,0000:3b:00.0=4", mixed.String())
	var mounted bool
	for _, m := range c.VolumeMounts {
		if m.MountPath == filepath.Dir(file) {
			mounted = m.ReadOnly
			var vol *corev1.Volume
			for i := range pod.Volumes {
				if pod.Volumes[i].Name == m.Name {
					vol = &pod.Volumes[i]
				}
			}
			require.NotNil(t, vol)
			require.Equal(t, cm.Name, vol.ConfigMap.Name)
		}
	}
	require.True(t, mounted, "the file is mounted read-only")
	sum := in.Spec.Template.Annotations["xpu-cdi/partition-layouts-checksum"]
	require.NotEmpty(t, sum)
	other := render(t, "--set", "partitions.layouts.halves=all=4", "--set", `partitions.layouts.mixed=all=2\,0000:3b:00.0=4`)
	require.NotEqual(t, sum, other.daemonSets["xpu-cdi-installer"].Spec.Template.Annotations["xpu-cdi/partition-layouts-checksum"])

	// Without layouts: no file, no ConfigMap.
	plain := render(t, "--set", "partitions.nodeLabel=true")
	require.NotContains(t, env(plain.daemonSets["xpu-cdi-installer"].Spec.Template.Spec.Containers[0]), "XPU_CDI_PARTITION_CONFIG")
	for _, m := range plain.configMaps {
		require.False(t, strings.HasSuffix(m.Name, "-partition-layouts"), m.Name)
	}
}
