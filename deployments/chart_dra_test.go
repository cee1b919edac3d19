package deployments

import (
	"maps"
	"slices"
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

	"github.com/xpu-cdi/xpu-cdi/internal/dra"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

// The chart's DRA part: the release is xpu in xpu-system (render), so its
// objects are named xpu-xpu-cdi-dra-driver.
const (
	chartDRAName    = "xpu-xpu-cdi-dra-driver"
	chartDRAAccount = "system:serviceaccount:xpu-system:" + chartDRAName
)

var draOn = []string{"--set", "dra.enabled=true", "--set", "devicePlugin.enabled=false"}

// manifest is deployments/xpu-dra-driver.yaml and the DeviceClasses, decoded strictly.
type manifest struct {
	sa      corev1.ServiceAccount
	role    rbacv1.ClusterRole
	binding rbacv1.ClusterRoleBinding
	vap     admissionv1.ValidatingAdmissionPolicy
	vapb    admissionv1.ValidatingAdmissionPolicyBinding
	ds      appsv1.DaemonSet
	classes map[string]resourceapi.DeviceClass
}

func plainDRA(t *testing.T) *manifest {
	t.Helper()
	docs := decodeAll(t, "xpu-dra-driver.yaml")
	m := &manifest{classes: map[string]resourceapi.DeviceClass{}}
	for key, into := range map[string]any{
		"ServiceAccount/xpu-dra-driver":                                  &m.sa,
		"ClusterRole/xpu-dra-driver":                                     &m.role,
		"ClusterRoleBinding/xpu-dra-driver":                              &m.binding,
		"ValidatingAdmissionPolicy/xpu-dra-driver-resourceslices":        &m.vap,
		"ValidatingAdmissionPolicyBinding/xpu-dra-driver-resourceslices": &m.vapb,
		"DaemonSet/xpu-dra-driver":                                       &m.ds,
	} {
		require.Contains(t, docs, key)
		require.NoError(t, yaml.UnmarshalStrict(docs[key], into), key)
	}
	require.Len(t, docs, 6)
	for name, doc := range decodeAll(t, "xpu-dra-deviceclasses.yaml") {
		var dc resourceapi.DeviceClass
		require.NoError(t, yaml.UnmarshalStrict(doc, &dc), name)
		m.classes[dc.Name] = dc
	}
	return m
}

// draParts returns the chart's one object of each DRA kind.
func draParts(t *testing.T, r *rendered) (*appsv1.DaemonSet, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	require.Len(t, r.serviceAccounts, 1)
	require.Len(t, r.clusterRoles, 1)
	require.Len(t, r.roleBindings, 1)
	require.Len(t, r.policies, 1)
	require.Len(t, r.policyBindings, 1)
	ds := r.daemonSets["xpu-dra-driver"]
	require.NotNil(t, ds)
	return ds, r.clusterRoles[0], r.roleBindings[0], r.policies[0], r.policyBindings[0]
}

// TestChartDRAMatchesManifest keeps the chart's DRA part and the plain
// manifests one thing: rendered with dra.enabled, every object is the
// manifest's up to names, labels, the image and the node selection (which
// is the chart's, the same as its other DaemonSets'). A change to either
// side fails here until the other follows.
func TestChartDRAMatchesManifest(t *testing.T) {
	plain := plainDRA(t)
	r := render(t, draOn...)
	ds, role, binding, vap, vapb := draParts(t, r)
	require.Len(t, r.daemonSets, 3, "the installer, the DRA driver and the exporter")
	sa := r.serviceAccounts[0]
	require.Equal(t, chartDRAName, sa.Name)
	require.Equal(t, "xpu-system", sa.Namespace)

	// RBAC: the same rules, bound to the chart's account.
	require.Equal(t, plain.role.Rules, role.Rules)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}}, binding.Subjects)
	require.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name}, binding.RoleRef)
	require.Equal(t, plain.binding.RoleRef.Kind, binding.RoleRef.Kind)

	// The policy: the same CEL but for the account it matches.
	expr := vap.Spec.MatchConditions[0].Expression
	require.Equal(t, `request.userInfo.username == "`+chartDRAAccount+`"`, expr)
	plainAccount := "system:serviceaccount:" + plain.sa.Namespace + ":" + plain.sa.Name
	vap.Spec.MatchConditions[0].Expression = strings.Replace(expr, chartDRAAccount, plainAccount, 1)
	require.Equal(t, plain.vap.Spec, vap.Spec)
	require.Equal(t, vap.Name, vapb.Spec.PolicyName)
	vapb.Spec.PolicyName = plain.vapb.Spec.PolicyName
	require.Equal(t, plain.vapb.Spec, vapb.Spec)

	// The DaemonSet. Node selection is the chart's: the same as its
	// installer's (the OR of the labels); the manifest's is its own.
	pod, plainPod := &ds.Spec.Template.Spec, &plain.ds.Spec.Template.Spec
	in := r.daemonSets["xpu-cdi-installer"].Spec.Template.Spec
	require.Equal(t, in.NodeSelector, pod.NodeSelector)
	require.Equal(t, in.Affinity, pod.Affinity)
	require.Equal(t, in.Tolerations, pod.Tolerations)
	require.Equal(t, in.PriorityClassName, pod.PriorityClassName)
	require.Equal(t, []string{"baidu.com/xpu.present=true", "feature.node.kubernetes.io/pci-1d22.present=true"}, affinity(ds))
	require.Equal(t, sa.Name, pod.ServiceAccountName)
	require.Equal(t, "localhost/xpu-cdi:0.1.0", pod.Containers[0].Image)
	checkPod(t, ds, draReads(t))
	for _, p := range []*corev1.PodSpec{pod, plainPod} {
		p.NodeSelector, p.Affinity, p.ServiceAccountName, p.Containers[0].Image = nil, nil, "", ""
	}
	// Variables the chart sets and the manifest leaves to the binary must
	// say the binary's defaults.
	defaults := map[string]string{
		"XPU_CDI_POLL_INTERVAL": dra.DefaultPollInterval.String(),
		"XPU_CDI_LOG_LEVEL":     "info", // --log-level's default
		"XPU_CDI_VENDOR":        cdispec.DefaultVendor,
		"XPU_CDI_CLASS":         cdispec.DefaultClass,
	}
	plainEnv := env(plainPod.Containers[0])
	var kept []corev1.EnvVar
	for _, e := range pod.Containers[0].Env {
		if _, ok := plainEnv[e.Name]; !ok && e.ValueFrom == nil {
			require.Contains(t, defaults, e.Name, "the chart sets %s, the manifest does not", e.Name)
			require.Equal(t, defaults[e.Name], e.Value, "%s: the chart's default differs from the binary's", e.Name)
			continue
		}
		kept = append(kept, e)
	}
	pod.Containers[0].Env = kept
	ds.Spec.Selector, plain.ds.Spec.Selector = nil, nil
	ds.Spec.Template.ObjectMeta, plain.ds.Spec.Template.ObjectMeta = metav1.ObjectMeta{}, metav1.ObjectMeta{}
	require.Equal(t, plain.ds.Spec, ds.Spec)

	// The DeviceClasses: the same names and specs.
	require.Len(t, r.deviceClasses, len(plain.classes))
	for name, dc := range plain.classes {
		require.Contains(t, r.deviceClasses, name)
		require.Equal(t, dc.Spec, r.deviceClasses[name].Spec, name)
	}
	checkClassSelection(t, r.deviceClasses, "xpu.baidu.com")
}

func TestChartDRAOptions(t *testing.T) {
	for _, tc := range []struct {
		description string
		set         []string
		check       func(t *testing.T, r *rendered)
	}{
		{"another driver name", []string{"dra.driverName=xpu.example.com"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			c := ds.Spec.Template.Spec.Containers[0]
			require.Equal(t, "xpu.example.com", env(c)["XPU_CDI_DRA_DRIVER_NAME"])
			require.Equal(t, "/var/lib/kubelet/plugins/xpu.example.com", hostPaths(ds)["/var/lib/kubelet/plugins/xpu.example.com"], "the plugin's directory follows the name")
			require.ElementsMatch(t, []string{"xpu.example.com", "kunlun1.xpu.example.com", "kunlun2.xpu.example.com", "kunlun3.xpu.example.com"}, mapKeys(r.deviceClasses))
			checkClassSelection(t, r.deviceClasses, "xpu.example.com")
		}},
		{"no class for every XPU", []string{"dra.deviceClasses.all.enabled=false"}, func(t *testing.T, r *rendered) {
			require.ElementsMatch(t, []string{"kunlun1.xpu.baidu.com", "kunlun2.xpu.baidu.com", "kunlun3.xpu.baidu.com"}, mapKeys(r.deviceClasses))
			checkClassSelection(t, r.deviceClasses, "xpu.baidu.com")
		}},
		{"no family classes", []string{"dra.deviceClasses.families.enabled=false"}, func(t *testing.T, r *rendered) {
			require.Equal(t, []string{"xpu.baidu.com"}, mapKeys(r.deviceClasses))
			require.Equal(t, "baidu.com/xpu", *r.deviceClasses["xpu.baidu.com"].Spec.ExtendedResourceName)
		}},
		{"no classes", []string{"dra.deviceClasses.families.enabled=false", "dra.deviceClasses.all.enabled=false"}, func(t *testing.T, r *rendered) {
			require.Empty(t, r.deviceClasses)
			draParts(t, r)
		}},
		{"no extended resource", []string{"dra.deviceClasses.all.extendedResourceName="}, func(t *testing.T, r *rendered) {
			require.Nil(t, r.deviceClasses["xpu.baidu.com"].Spec.ExtendedResourceName)
			checkClassSelection(t, r.deviceClasses, "xpu.baidu.com")
		}},
		{"another extended resource", []string{"dra.deviceClasses.all.extendedResourceName=kunlunxin.com/xpu"}, func(t *testing.T, r *rendered) {
			require.Equal(t, "kunlunxin.com/xpu", *r.deviceClasses["xpu.baidu.com"].Spec.ExtendedResourceName)
		}},
		{"interval, log level, CDI kind", []string{"dra.healthCheckInterval=30s", "logLevel=debug", "devicePlugin.cdiVendor=example.com", "devicePlugin.cdiClass=npu"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			e := env(ds.Spec.Template.Spec.Containers[0])
			require.Equal(t, "30s", e["XPU_CDI_POLL_INTERVAL"])
			require.Equal(t, "debug", e["XPU_CDI_LOG_LEVEL"])
			require.Equal(t, "example.com", e["XPU_CDI_VENDOR"])
			require.Equal(t, "npu", e["XPU_CDI_CLASS"])
			require.Equal(t, "example.com", env(r.daemonSets["xpu-cdi-installer"].Spec.Template.Spec.Containers[0])["XPU_CDI_VENDOR"], "the names are the installer's spec's")
		}},
		{"another kubelet directory", []string{"dra.kubeletDir=/data/kubelet/"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			e := env(ds.Spec.Template.Spec.Containers[0])
			require.Equal(t, "/data/kubelet/plugins_registry", e["XPU_CDI_PLUGIN_REGISTRY_DIR"])
			require.Equal(t, "/data/kubelet/plugins/xpu.baidu.com", e["XPU_CDI_PLUGIN_DATA_DIR"])
			hp := hostPaths(ds)
			require.Equal(t, "/data/kubelet/plugins_registry", hp["/data/kubelet/plugins_registry"])
			require.Equal(t, "/data/kubelet/plugins/xpu.baidu.com", hp["/data/kubelet/plugins/xpu.baidu.com"])
			require.NotContains(t, hp, "/var/lib/kubelet/plugins_registry")
		}},
		{"the API server on loopback", []string{"dra.apiServer.host=127.0.0.1", "dra.apiServer.port=6443"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			e := env(ds.Spec.Template.Spec.Containers[0])
			require.Equal(t, "127.0.0.1", e["KUBERNETES_SERVICE_HOST"])
			require.Equal(t, "6443", e["KUBERNETES_SERVICE_PORT"])
		}},
		{"resources", []string{"dra.resources.limits.memory=256Mi"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			res := ds.Spec.Template.Spec.Containers[0].Resources
			require.Equal(t, "256Mi", res.Limits.Memory().String())
			require.Equal(t, "48Mi", res.Requests.Memory().String())
		}},
		{"no resources", []string{"dra.resources=null"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			require.Empty(t, ds.Spec.Template.Spec.Containers[0].Resources)
		}},
		{"driver in a tree of its own", []string{"installer.devRoot=/run/kunlun/driver", "installer.driverRoot=/run/kunlun/driver/"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			hp := hostPaths(ds)
			require.Equal(t, "/run/kunlun/driver/dev", hp["/host/dev"], "the devices the installer's spec names")
			require.Equal(t, "/run/kunlun/driver/proc", hp["/host/proc"])
			require.Equal(t, "/run/kunlun/driver/sys", hp["/host/sys"])
			require.Equal(t, "/run/kunlun/driver/usr/local", hp["/host/usr/local"])
		}},
		{"the installer's spec elsewhere", []string{"installer.specFile=/etc/xpu-cdi/cdi/xpu.yaml"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			require.Equal(t, "/etc/cdi,/var/run/cdi,/etc/xpu-cdi/cdi", env(ds.Spec.Template.Spec.Containers[0])["XPU_CDI_SPEC_DIRS"])
			require.Equal(t, "/etc/xpu-cdi/cdi", hostPaths(ds)["/etc/xpu-cdi/cdi"])
		}},
		{"the installer's spec in /etc/cdi", []string{"installer.specFile=/etc/cdi/xpu.json"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			require.NotContains(t, env(ds.Spec.Template.Spec.Containers[0]), "XPU_CDI_SPEC_DIRS", "a default directory")
			require.Len(t, ds.Spec.Template.Spec.Volumes, 8)
		}},
		{"installer off: host packages write the spec", []string{"installer.enabled=false", "installer.devRoot=/ignored"}, func(t *testing.T, r *rendered) {
			require.Len(t, r.daemonSets, 2, "the DRA driver and the exporter")
			ds, _, _, _, _ := draParts(t, r)
			hp := hostPaths(ds)
			require.Equal(t, "/dev", hp["/host/dev"])
			require.Equal(t, "/etc/cdi", hp["/etc/cdi"])
			require.Equal(t, "/var/run/cdi", hp["/var/run/cdi"])
		}},
		{"node selection, image, host network", []string{"nodeAffinityLabels=null", "nodeSelector.pool=xpu", "tolerations=null", "priorityClassName=", "image.tag=1.2.3", "hostNetwork=true"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			pod := ds.Spec.Template.Spec
			require.Nil(t, affinity(ds))
			require.Equal(t, map[string]string{"kubernetes.io/os": "linux", "pool": "xpu"}, pod.NodeSelector)
			require.Empty(t, pod.Tolerations)
			require.Empty(t, pod.PriorityClassName)
			require.True(t, pod.HostNetwork)
			require.Equal(t, "localhost/xpu-cdi:1.2.3", pod.Containers[0].Image)
		}},
		{"another release namespace", []string{"--namespace", "kube-system"}, func(t *testing.T, r *rendered) {
			_, _, binding, vap, _ := draParts(t, r)
			require.Equal(t, "kube-system", binding.Subjects[0].Namespace)
			require.Contains(t, vap.Spec.MatchConditions[0].Expression, `"system:serviceaccount:kube-system:`+chartDRAName+`"`)
		}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			args := append([]string(nil), draOn...)
			for i := 0; i < len(tc.set); i++ {
				if strings.HasPrefix(tc.set[i], "--") {
					args = append(args, tc.set[i], tc.set[i+1])
					i++
					continue
				}
				args = append(args, "--set", tc.set[i])
			}
			r := render(t, args...)
			for name, ds := range r.daemonSets {
				if !slices.Contains(tc.set, "--namespace") { // checkPod wants xpu-system
					checkPod(t, ds, readsOf(t, name))
				}
			}
			tc.check(t, r)
		})
	}
}

// TestChartDRAWithDevicePlugin: both on would hand out each XPU twice;
// the chart refuses it, naming the keys, and renders nothing.
func TestChartDRAWithDevicePlugin(t *testing.T) {
	out, err := helmTemplate(t, "--set", "dra.enabled=true")
	require.ErrorContains(t, err, "dra.enabled and devicePlugin.enabled")
	require.ErrorContains(t, err, "Set devicePlugin.enabled=false with dra.enabled=true")
	require.Empty(t, out)
}

func mapKeys[V any](m map[string]V) []string { return slices.Collect(maps.Keys(m)) }
