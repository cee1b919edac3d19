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
)

// The chart's DRA part: the release is xpu in xpu-system (render), so its
// objects are named xpu-xpu-cdi-dra-driver.
const chartDRAName = "xpu-xpu-cdi-dra-driver"

var draOn = []string{"--set", "dra.enabled=true", "--set", "devicePlugin.enabled=false"}

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
			require.ElementsMatch(t, []string{
				"xpu.example.com", "kunlun1.xpu.example.com", "kunlun2.xpu.example.com", "kunlun3.xpu.example.com",
				"xpu-48gb.example.com", "xpu-24gb.example.com", "xpu-16gb.example.com", "xpu-8gb.example.com", "xpu-5gb.example.com",
			}, mapKeys(r.deviceClasses))
			checkClassSelection(t, r.deviceClasses, "xpu.example.com")
		}},
		{"partition classes of other sizes", []string{"dra.deviceClasses.partitions.sizes={48gb,512mb}", "dra.deviceClasses.families.enabled=false"}, func(t *testing.T, r *rendered) {
			require.ElementsMatch(t, []string{"xpu.baidu.com", "xpu-48gb.baidu.com", "xpu-512mb.baidu.com"}, mapKeys(r.deviceClasses))
			require.Contains(t, r.deviceClasses["xpu-512mb.baidu.com"].Spec.Selectors[0].CEL.Expression, `quantity("512Mi")`)
			checkClassSelection(t, r.deviceClasses, "xpu.baidu.com")
		}},
		{"no partition classes", []string{"dra.deviceClasses.partitions.enabled=false", "dra.deviceClasses.families.enabled=false"}, func(t *testing.T, r *rendered) {
			require.Equal(t, []string{"xpu.baidu.com"}, mapKeys(r.deviceClasses))
		}},
		{"no class for every XPU", []string{"dra.deviceClasses.all.enabled=false", "dra.deviceClasses.partitions.enabled=false"}, func(t *testing.T, r *rendered) {
			require.ElementsMatch(t, []string{"kunlun1.xpu.baidu.com", "kunlun2.xpu.baidu.com", "kunlun3.xpu.baidu.com"}, mapKeys(r.deviceClasses))
			checkClassSelection(t, r.deviceClasses, "xpu.baidu.com")
		}},
		{"no family classes", []string{"dra.deviceClasses.families.enabled=false", "dra.deviceClasses.partitions.enabled=false"}, func(t *testing.T, r *rendered) {
			require.Equal(t, []string{"xpu.baidu.com"}, mapKeys(r.deviceClasses))
			require.Equal(t, "baidu.com/xpu", *r.deviceClasses["xpu.baidu.com"].Spec.ExtendedResourceName)
		}},
		{"no classes", []string{"dra.deviceClasses.families.enabled=false", "dra.deviceClasses.all.enabled=false", "dra.deviceClasses.partitions.enabled=false"}, func(t *testing.T, r *rendered) {
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
		{"interval, log level, CDI kind", []string{"dra.healthCheckInterval=30s", "logLevel=debug", "cdi.vendor=example.com", "cdi.class=npu"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			e := env(ds.Spec.Template.Spec.Containers[0])
			require.Equal(t, "30s", e["XPU_CDI_POLL_INTERVAL"])
			require.Equal(t, "debug", e["XPU_CDI_LOG_LEVEL"])
			require.Equal(t, "example.com", e["XPU_CDI_VENDOR"])
			require.Equal(t, "npu", e["XPU_CDI_CLASS"])
			require.Equal(t, "example.com", env(r.daemonSets["xpu-cdi-installer"].Spec.Template.Spec.Containers[0])["XPU_CDI_VENDOR"], "the names are the installer's spec's")
		}},
		{"another kubelet directory", []string{"host.kubeletDir=/data/kubelet/"}, func(t *testing.T, r *rendered) {
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
		{"driver in a tree of its own", []string{"host.devRoot=/run/kunlun/driver", "host.driverRoot=/run/kunlun/driver/"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			hp := hostPaths(ds)
			require.Equal(t, "/run/kunlun/driver/dev", hp["/host/dev"], "the devices the installer's spec names")
			require.Equal(t, "/run/kunlun/driver/proc", hp["/host/proc"])
			require.Equal(t, "/run/kunlun/driver/sys", hp["/host/sys"])
			require.Equal(t, "/run/kunlun/driver/usr/local", hp["/host/usr/local"])
		}},
		{"the installer's spec elsewhere", []string{"cdi.specFile=/etc/xpu-cdi/cdi/xpu.yaml"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			require.Equal(t, "/etc/xpu-cdi/cdi", env(ds.Spec.Template.Spec.Containers[0])["XPU_CDI_SPEC_DIRS"], "the installer's spec only")
			hp := hostPaths(ds)
			require.Equal(t, "/etc/xpu-cdi/cdi", hp["/etc/xpu-cdi/cdi"])
			require.NotContains(t, hp, "/etc/cdi")
		}},
		{"the installer's spec in /etc/cdi", []string{"cdi.specFile=/etc/cdi/xpu.json"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			require.Equal(t, "/etc/cdi", env(ds.Spec.Template.Spec.Containers[0])["XPU_CDI_SPEC_DIRS"])
			require.Len(t, ds.Spec.Template.Spec.Volumes, 7)
		}},
		{"installer off: host packages write the spec", []string{"installer.enabled=false"}, func(t *testing.T, r *rendered) {
			require.Len(t, r.daemonSets, 2, "the DRA driver and the exporter")
			ds, _, _, _, _ := draParts(t, r)
			hp := hostPaths(ds)
			require.Equal(t, "/dev", hp["/host/dev"])
			require.Equal(t, "/etc/cdi", hp["/etc/cdi"])
			require.Equal(t, "/var/run/cdi", hp["/var/run/cdi"])
			require.Equal(t, "/etc/cdi,/var/run/cdi", env(ds.Spec.Template.Spec.Containers[0])["XPU_CDI_SPEC_DIRS"])
		}},
		{"installer off, other spec directories", []string{"installer.enabled=false", "cdi.specDirs={/etc/cdi,/opt/cdi}"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			require.Equal(t, "/etc/cdi,/opt/cdi", env(ds.Spec.Template.Spec.Containers[0])["XPU_CDI_SPEC_DIRS"])
			require.Equal(t, "/opt/cdi", hostPaths(ds)["/opt/cdi"])
		}},
		{"the DRA driver's own scheduling and resources", []string{"dra.nodeSelector.pool=dra", "dra.tolerations[0].operator=Exists", "dra.priorityClassName=xpu-critical", "resources.limits.memory=1Gi"}, func(t *testing.T, r *rendered) {
			ds, _, _, _, _ := draParts(t, r)
			pod := ds.Spec.Template.Spec
			require.Equal(t, map[string]string{"pool": "dra"}, pod.NodeSelector, "replaces the top-level one")
			require.Equal(t, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, pod.Tolerations)
			require.Equal(t, "xpu-critical", pod.PriorityClassName)
			require.Equal(t, "192Mi", pod.Containers[0].Resources.Limits.Memory().String(), "its own resources win")
			in := r.daemonSets["xpu-cdi-installer"].Spec.Template.Spec
			require.Equal(t, map[string]string{"kubernetes.io/os": "linux"}, in.NodeSelector, "the others keep the top-level ones")
			require.Equal(t, "system-node-critical", in.PriorityClassName)
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

// TestChartDRADynamic: dra.partitions.mode=dynamic gives the DRA driver's
// pod, and only then, what cutting a card at Prepare takes: the mode and
// the idle layout, the host's /sys read-write (sriov_numvfs), the host's
// /run (the node's layout lock below /run/xpu-cdi), the kubelet's
// PodResources socket, the CDI spec directories read-write (the node
// spec's devices rewritten after a cut), and the capabilities and AppArmor
// profile of the in-use check's scan of host processes, as the installer
// has them with a static layout. Static mode's pod is the one the chart
// always rendered (TestManifestsUpToDate holds it too).
func TestChartDRADynamic(t *testing.T) {
	static := func(t *testing.T, args ...string) *appsv1.DaemonSet {
		t.Helper()
		ds, _, _, _, _ := draParts(t, render(t, append(append([]string(nil), draOn...), args...)...))
		return ds
	}
	def := static(t)
	require.Equal(t, def, static(t, "--set", "dra.partitions.mode=static", "--set", "dra.partitions.idleLayout=keep"), "static, said or not, is one pod")
	c := def.Spec.Template.Spec.Containers[0]
	e := env(c)
	for _, k := range []string{"XPU_CDI_PARTITIONS", "XPU_CDI_IDLE_LAYOUT", "XPU_CDI_POD_RESOURCES_SOCKET"} {
		require.NotContains(t, e, k)
	}
	require.Empty(t, c.SecurityContext.Capabilities.Add, "static mode keeps no capability")
	require.Nil(t, c.SecurityContext.AppArmorProfile)
	for _, m := range c.VolumeMounts {
		if m.Name != "plugins-registry" && m.Name != "plugin-data" {
			require.True(t, m.ReadOnly, "static mode reads the host only: %s", m.MountPath)
		}
	}
	require.NotContains(t, hostPaths(def), "/host/run")
	require.False(t, def.Spec.Template.Spec.HostPID)

	for _, tc := range []struct {
		description string
		set         []string
		idle        string
		kubelet     string // the kubelet's root directory
		run         string // the host directory mounted at /host/run
	}{
		{"dynamic", nil, "keep", "/var/lib/kubelet", "/run"},
		{"idle cards whole", []string{"dra.partitions.idleLayout=whole"}, "whole", "/var/lib/kubelet", "/run"},
		{"another kubelet directory", []string{"host.kubeletDir=/data/kubelet/"}, "keep", "/data/kubelet", "/run"},
		{"driver in a tree of its own", []string{"host.devRoot=/run/kunlun/driver", "host.driverRoot=/run/kunlun/driver"}, "keep", "/var/lib/kubelet", "/run/kunlun/driver/run"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			args := append(append([]string(nil), draOn...), "--set", "dra.partitions.mode=dynamic")
			for _, v := range tc.set {
				args = append(args, "--set", v)
			}
			r := render(t, args...)
			for name, ds := range r.daemonSets {
				checkPod(t, ds, readsOf(t, name))
			}
			ds, _, _, _, _ := draParts(t, r)
			pod := ds.Spec.Template.Spec
			c := pod.Containers[0]
			e := env(c)
			require.Equal(t, "dynamic", e["XPU_CDI_PARTITIONS"])
			require.Equal(t, tc.idle, e["XPU_CDI_IDLE_LAYOUT"])
			require.Equal(t, tc.kubelet+"/pod-resources/kubelet.sock", e["XPU_CDI_POD_RESOURCES_SOCKET"])
			require.Equal(t, "/host", e["XPU_CDI_DEV_ROOT"], "the lock is below the dev root, at /host/run/xpu-cdi")

			// The in-use check reads other users' /proc/PID/fd through the
			// host's /proc at /host/proc (no hostPID: that procfs is the
			// host's), as the installer's does.
			require.Equal(t, []string{"ALL"}, capabilities(c))
			require.Equal(t, []corev1.Capability{"SYS_PTRACE", "DAC_READ_SEARCH"}, c.SecurityContext.Capabilities.Add)
			require.Equal(t, corev1.AppArmorProfileTypeUnconfined, c.SecurityContext.AppArmorProfile.Type)
			require.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
			require.Nil(t, c.SecurityContext.Privileged)
			require.False(t, pod.HostPID)

			hp := hostPaths(ds)
			require.Equal(t, tc.run, hp["/host/run"], "the layout lock's /run/xpu-cdi, which the driver creates 0700")
			require.Equal(t, tc.kubelet+"/pod-resources", hp[tc.kubelet+"/pod-resources"])
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range c.VolumeMounts {
				mounts[m.MountPath] = m
			}
			require.False(t, mounts["/host/sys"].ReadOnly, "sriov_numvfs is written")
			require.False(t, mounts["/host/run"].ReadOnly, "the lock is taken")
			require.True(t, mounts[tc.kubelet+"/pod-resources"].ReadOnly)
			for _, p := range []string{"/host/dev", "/host/proc", "/host/usr/local"} {
				require.True(t, mounts[p].ReadOnly, "%s stays read-only", p)
			}
			dirs := strings.Split(e["XPU_CDI_SPEC_DIRS"], ",")
			require.NotEmpty(t, dirs)
			for _, d := range dirs {
				require.Contains(t, mounts, d)
				require.False(t, mounts[d].ReadOnly, "the node spec's devices are rewritten after a cut")
			}
			for _, v := range pod.Volumes {
				switch v.Name {
				case "pod-resources":
					require.Equal(t, corev1.HostPathDirectory, *v.HostPath.Type, "the kubelet's: not created by the driver")
				case "host-run":
					require.Equal(t, corev1.HostPathDirectoryOrCreate, *v.HostPath.Type)
				}
			}

			// The exporter's admin-access claim would hold every device of
			// the slice: it is privileged instead, as with a static layout.
			for _, ct := range r.claimTemplates {
				for _, req := range ct.Spec.Spec.Devices.Requests {
					require.True(t, req.Exactly == nil || req.Exactly.AdminAccess == nil || !*req.Exactly.AdminAccess, "%s asks for admin access", ct.Name)
				}
			}
			ex := r.daemonSets["xpu-exporter"].Spec.Template.Spec.Containers[0]
			require.True(t, *ex.SecurityContext.Privileged)

			// The installer keeps no layout and gets no Node access.
			ie := env(r.daemonSets["xpu-cdi-installer"].Spec.Template.Spec.Containers[0])
			require.NotContains(t, ie, "XPU_CDI_PARTITION_LAYOUT")
			require.NotContains(t, ie, "XPU_CDI_PARTITION_NODE_LABEL")
		})
	}
}
