package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// draCluster is the private cluster with xpu-dra-driver deployed from
// deployments/ on a fake 8-XPU P800 host.
type draCluster struct {
	*harness.Cluster
	tree    *fakehost.Tree
	vendor  string
	image   string // glibc + busybox + xpu-test
	dataDir string // the driver's plugin data directory on the host
	ds      *appsv1.DaemonSet
}

// startDRA starts the cluster on rt and applies deployments/xpu-dra-*.yaml.
// What the test changes in the DaemonSet: the image (the static binaries
// imported into the runtime), the host paths of /dev, /proc, /sys and
// /usr/local (the fake host's), the spec directories (the runtime's), the
// kubelet's directories (the test kubelet's root, at the same paths inside),
// the CDI vendor (a test vendor), host networking and the API server's
// loopback address (the test cluster has no CNI network nor service
// routing). The rest (RBAC, the policy, command, variables, security
// context, node selector) is the manifests'.
func startDRA(t testing.TB, start func(t testing.TB) harness.CRI) *draCluster {
	t.Helper()
	return startDRAOn(t, start, fakehost.P800x8(), 8)
}

// startDRAOn is startDRA on the fake host h, which offers n devices.
func startDRAOn(t testing.TB, start func(t testing.TB) harness.CRI, h fakehost.Host, n int) *draCluster {
	t.Helper()
	d := &draCluster{tree: FakeHost(t, h)}
	d.Cluster = harness.NewCluster(t, harness.WithClusterRuntime(start), harness.WithNodeLabels("baidu.com/xpu.present=true"))
	d.vendor = harness.UniqueVendor(t)
	d.Runtime.WriteSpec(t, GenerateSpec(t, d.tree, d.vendor), d.vendor)
	d.image = d.ImportImage(t, glibcRootfs(t), "xpu-e2e-glibc")

	rootfs := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "usr", "bin"), 0o755))
	for _, name := range []string{"xpu-cdi", "xpu-runtime-hook", "xpu-device-plugin", "xpu-dra-driver"} {
		data, err := os.ReadFile(Binary(t, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(rootfs, "usr", "bin", name), data, 0o755))
	}
	driverImage := d.ImportImage(t, rootfs, "xpu-cdi-e2e-dra", harness.WithImageCmd("/usr/bin/xpu-dra-driver"))

	root := moduleRoot(t)
	classes, err := os.ReadFile(filepath.Join(root, "deployments", "xpu-dra-deviceclasses.yaml"))
	require.NoError(t, err)
	d.Apply(t, string(classes))
	data, err := os.ReadFile(filepath.Join(root, "deployments", "xpu-dra-driver.yaml"))
	require.NoError(t, err)
	var rest []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.Contains(doc, "\nkind: DaemonSet\n") {
			d.ds = &appsv1.DaemonSet{}
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), d.ds))
			continue
		}
		rest = append(rest, doc)
	}
	require.NotNil(t, d.ds)
	d.Apply(t, strings.Join(rest, "\n---\n"))

	d.dataDir = filepath.Join(d.PluginsDir(), "xpu.baidu.com")
	spec := &d.ds.Spec.Template.Spec
	spec.HostNetwork = true
	ctr := &spec.Containers[0]
	ctr.Image, ctr.ImagePullPolicy = driverImage, corev1.PullNever
	ctr.Env = append(ctr.Env, d.InClusterEnv()...)
	setEnv(ctr,
		corev1.EnvVar{Name: "XPU_CDI_VENDOR", Value: d.vendor},
		corev1.EnvVar{Name: "XPU_CDI_POLL_INTERVAL", Value: "500ms"},
		corev1.EnvVar{Name: "XPU_CDI_PLUGIN_DATA_DIR", Value: d.dataDir},
		corev1.EnvVar{Name: "XPU_CDI_PLUGIN_REGISTRY_DIR", Value: d.PluginsRegistryDir()},
	)
	hostPaths := map[string]string{
		"/dev": d.tree.Path("/dev"), "/proc": d.tree.Path("/proc"), "/sys": d.tree.Path("/sys"), "/usr/local": d.tree.Path("/usr/local"),
		"/etc/cdi": d.SpecDir(), "/var/run/cdi": t.TempDir(),
		"/var/lib/kubelet/plugins_registry": d.PluginsRegistryDir(), "/var/lib/kubelet/plugins/xpu.baidu.com": d.dataDir,
	}
	for i := range spec.Volumes {
		if hp := spec.Volumes[i].HostPath; hp != nil {
			p, ok := hostPaths[hp.Path]
			require.True(t, ok, "volume %s: no test path for %s", spec.Volumes[i].Name, hp.Path)
			hp.Path = p
		}
	}
	for i, m := range ctr.VolumeMounts {
		if strings.HasPrefix(m.MountPath, "/var/lib/kubelet/") {
			ctr.VolumeMounts[i].MountPath = hostPaths[m.MountPath]
		}
	}
	ctx := testCtx(t)
	_, err = d.Client.AppsV1().DaemonSets(d.ds.Namespace).Create(ctx, d.ds, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := waitDaemonSetPod(t, d.Cluster, d.ds.Namespace, "app.kubernetes.io/name=xpu-dra-driver")
	testutil.Eventually(t, func(t testing.TB) bool {
		return strings.Contains(d.Logs(t, d.ds.Namespace, pod.Name, "xpu-dra-driver"), fmt.Sprintf("publishing %d XPU(s) in the ResourceSlice of node %s", n, d.Node))
	}, podTimeout, 500*time.Millisecond, "the driver did not publish")
	d.waitSlice(t, func(devs []resourceapi.Device) bool { return len(devs) == n })
	return d
}

// setEnv sets variables of c, replacing those of the same name (the
// manifests set some, a name given twice is the API server's warning).
func setEnv(c *corev1.Container, vars ...corev1.EnvVar) {
	for _, v := range vars {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == v.Name })
		if i < 0 {
			c.Env = append(c.Env, v)
			continue
		}
		c.Env[i] = v
	}
}

// waitSlice waits until the node's slice of xpu.baidu.com satisfies ok.
func (d *draCluster) waitSlice(t testing.TB, ok func([]resourceapi.Device) bool) []resourceapi.Device {
	t.Helper()
	var last []resourceapi.Device
	require.Eventually(t, func() bool {
		slices, err := d.Client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, s := range slices.Items {
			if s.Spec.Driver == "xpu.baidu.com" && s.Spec.NodeName != nil && *s.Spec.NodeName == d.Node {
				last = s.Spec.Devices
				return ok(last)
			}
		}
		return false
	}, podTimeout, 250*time.Millisecond, "the ResourceSlice of node %s: %+v", d.Node, last)
	return last
}

// driverPod returns the DaemonSet's pod.
func (d *draCluster) driverPod(t testing.TB) *corev1.Pod {
	t.Helper()
	return waitDaemonSetPod(t, d.Cluster, d.ds.Namespace, "app.kubernetes.io/name=xpu-dra-driver")
}

// allocated returns the device indices the pod's claim was allocated.
func (d *draCluster) allocated(t testing.TB, podName string) []int {
	t.Helper()
	ctx := context.Background()
	pod, err := d.Client.CoreV1().Pods("default").Get(ctx, podName, metav1.GetOptions{})
	require.NoError(t, err)
	var claimName string
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			claimName = *s.ResourceClaimName
		}
	}
	if claimName == "" && pod.Status.ExtendedResourceClaimStatus != nil {
		claimName = pod.Status.ExtendedResourceClaimStatus.ResourceClaimName
	}
	if claimName == "" {
		for _, rc := range pod.Spec.ResourceClaims {
			if rc.ResourceClaimName != nil {
				claimName = *rc.ResourceClaimName
			}
		}
	}
	require.NotEmpty(t, claimName, "pod %s has no claim: %+v", podName, pod.Status)
	claim, err := d.Client.ResourceV1().ResourceClaims("default").Get(ctx, claimName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, claim.Status.Allocation, "claim %s", claimName)
	var out []int
	for _, r := range claim.Status.Allocation.Devices.Results {
		require.Equal(t, "xpu.baidu.com", r.Driver)
		require.Equal(t, d.Node, r.Pool)
		n, err := strconv.Atoi(strings.TrimPrefix(r.Device, "xpu-"))
		require.NoError(t, err, r.Device)
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// seesExactly checks that the pod's container has exactly the XPUs idx (the
// host's major:minor, /dev/xpuctrl, one XPU_CDI_DEVICE_N each) and that the
// XRE loads (the hook ran).
func (d *draCluster) seesExactly(t *testing.T, podName string, idx ...int) {
	t.Helper()
	r := d.Exec(t, "default", podName, "main", "sh", "-c", listXPUs+"; xpu-test")
	require.True(t, r.Success(), r.String())
	nodes, env := parseNodes(t, r.Stdout)
	wantNodes, wantEnv := expect(d.tree, idx...)
	require.Equal(t, wantNodes, nodes, "pod %s", podName)
	require.Equal(t, wantEnv, env, "pod %s", podName)
	require.Contains(t, r.Stdout, fmt.Sprintf("xpu devices: %d\n", len(idx)), "xpu-test loads libxpurt.so.1 (the hook ran) and counts the devices")
}

// deletePod deletes a pod and waits until it is gone.
func (d *draCluster) deletePod(t testing.TB, name string) {
	t.Helper()
	zero := int64(0)
	err := d.Client.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if apierrors.IsNotFound(err) {
		return
	}
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := d.Client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, podTimeout, 250*time.Millisecond, "pod %s not gone", name)
}

// recordDevice is the part of a device of a claim record records reads.
type recordDevice struct {
	AdminAccess bool `json:"adminAccess"`
}

// records are the claim records in the driver's data directory, but those
// of admin-access claims only (the chart's exporter holds one on every
// XPU, which takes none from the pods), and not the layout records of
// dynamic mode (layout-ADDRESS.json, one per card it laid out).
func (d *draCluster) records(t testing.TB) []string {
	t.Helper()
	dir := filepath.Join(d.dataDir, "claims")
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "layout-") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if os.IsNotExist(err) {
			continue // unprepared meanwhile
		}
		require.NoError(t, err)
		var rec struct {
			Devices []recordDevice `json:"devices"`
		}
		if json.Unmarshal(data, &rec) == nil && len(rec.Devices) > 0 && !slices.ContainsFunc(rec.Devices, func(d recordDevice) bool { return !d.AdminAccess }) {
			continue
		}
		out = append(out, e.Name())
	}
	return out
}

// waitUnprepared waits until the driver holds no claim record (the
// kubelet unprepared every claim); the failure names the records last seen.
func (d *draCluster) waitUnprepared(t testing.TB, msgAndArgs ...any) {
	t.Helper()
	testutil.Eventually(t, func(t testing.TB) bool { return assert.Empty(t, d.records(t), "claim records left") },
		podTimeout, 250*time.Millisecond, msgAndArgs...)
}

// waitPending waits until the scheduler said why the pod cannot be placed,
// and returns its message.
func (d *draCluster) waitPending(t testing.TB, name string) string {
	t.Helper()
	var msg string
	d.WaitPod(t, "default", name, podTimeout, func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				msg = c.Message
				return true
			}
		}
		return false
	})
	// It stays so.
	time.Sleep(2 * time.Second)
	p, err := d.Client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.PodPending, p.Status.Phase)
	require.Empty(t, p.Spec.NodeName)
	return msg
}

func (d *draCluster) setState(t testing.TB, n int, state string) {
	t.Helper()
	require.NoError(t, os.WriteFile(d.tree.Path(fmt.Sprintf("/proc/xpu/dev%d/state", n)), []byte(state+"\n"), 0o644))
}

// numaOf is the NUMA node the fake host gave device idx.
func numaOf(tree *fakehost.Tree, idx int) int {
	i := slices.IndexFunc(tree.Host.Devices, func(h fakehost.Device) bool { return h.Index == idx })
	if i < 0 {
		return -1
	}
	return tree.Host.Devices[i].NUMANode
}

// TestDRADriver deploys xpu-dra-driver from deployments/ on the private
// 1.37 cluster (containerd 2.x, then CRI-O) with a fake 8-XPU P800 host
// and runs pods with ResourceClaims against it.
func TestDRADriver(t *testing.T) {
	harness.RequiresRoot(t)
	for _, rt := range clusterRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			d := startDRA(t, rt.start)
			img := d.image

			t.Run("the slice", func(t *testing.T) {
				devs := d.waitSlice(t, func(devs []resourceapi.Device) bool { return len(devs) == 8 })
				for i, dev := range devs {
					require.Equal(t, fmt.Sprintf("xpu-%d", i), dev.Name)
					require.Equal(t, "P800", *dev.Attributes["model"].StringValue)
					require.Empty(t, dev.Taints)
				}
			})

			t.Run("one XPU from a template", func(t *testing.T) {
				d.Apply(t, example(t, "dra-one-xpu.yaml", img))
				d.WaitPodRunning(t, "default", "train-one-xpu", podTimeout)
				idx := d.allocated(t, "train-one-xpu")
				require.Len(t, idx, 1)
				d.seesExactly(t, "train-one-xpu", idx...)
				require.Len(t, d.records(t), 1)
				// Deleting the pod unprepares: the claim record goes, and
				// the XPU is free for the next pod that asks for it.
				d.deletePod(t, "train-one-xpu")
				d.waitUnprepared(t, "train-one-xpu deleted")
				d.ApplyObjects(t, claimTemplate("that-one", 1, false, fmt.Sprintf(`device.attributes["xpu.baidu.com"].index == %d`, idx[0])))
				d.ApplyObjects(t, xpuPod("dra-next", img, "template:that-one"))
				d.WaitPodRunning(t, "default", "dra-next", podTimeout)
				require.Equal(t, idx, d.allocated(t, "dra-next"))
				d.deletePod(t, "dra-next")
			})

			t.Run("two XPUs on one NUMA node", func(t *testing.T) {
				// Take xpu-0..2 first so that a NUMA-blind allocator would
				// split the pair across nodes.
				d.ApplyObjects(t, claimTemplate("three-low", 3, false, `device.attributes["xpu.baidu.com"].index < 3`))
				d.ApplyObjects(t, xpuPod("dra-three", img, "template:three-low"))
				d.WaitPodRunning(t, "default", "dra-three", podTimeout)
				d.Apply(t, example(t, "dra-two-xpus-one-numa.yaml", img))
				d.WaitPodRunning(t, "default", "train-two-xpus", podTimeout)
				idx := d.allocated(t, "train-two-xpus")
				require.Len(t, idx, 2)
				require.Equal(t, numaOf(d.tree, idx[0]), numaOf(d.tree, idx[1]), "xpu %v on one NUMA node", idx)
				d.seesExactly(t, "train-two-xpus", idx...)
				d.deletePod(t, "train-two-xpus")
				d.deletePod(t, "dra-three")
			})

			t.Run("a CEL selector on the model", func(t *testing.T) {
				d.Apply(t, example(t, "dra-p800.yaml", img))
				d.WaitPodRunning(t, "default", "train-p800", podTimeout)
				d.ApplyObjects(t, claimTemplate("r200", 1, false, `device.attributes["xpu.baidu.com"].model == "R200"`))
				d.ApplyObjects(t, xpuPod("dra-r200", img, "template:r200"))
				msg := d.waitPending(t, "dra-r200")
				require.Contains(t, msg, "cannot allocate all claims", msg)
				d.deletePod(t, "dra-r200")
				d.deletePod(t, "train-p800")
			})

			t.Run("one claim shared by two pods", func(t *testing.T) {
				d.Apply(t, example(t, "dra-shared-claim.yaml", img))
				d.WaitPodRunning(t, "default", "share-a", podTimeout)
				d.WaitPodRunning(t, "default", "share-b", podTimeout)
				a, b := d.allocated(t, "share-a"), d.allocated(t, "share-b")
				require.Len(t, a, 1)
				require.Equal(t, a, b)
				d.seesExactly(t, "share-a", a...)
				d.seesExactly(t, "share-b", a...)
				d.deletePod(t, "share-a")
				d.deletePod(t, "share-b")
				d.MustKubectl(t, "delete", "resourceclaim", "--namespace", "default", "shared-xpu")
			})

			t.Run("a request larger than what is free stays Pending", func(t *testing.T) {
				d.ApplyObjects(t, claimTemplate("nine", 9, false))
				d.ApplyObjects(t, xpuPod("dra-nine", img, "template:nine"))
				msg := d.waitPending(t, "dra-nine")
				require.Contains(t, msg, "cannot allocate all claims", msg)
				d.deletePod(t, "dra-nine")
			})

			t.Run("an XPU in error is not allocated", func(t *testing.T) {
				d.setState(t, 6, "ERROR")
				defer d.setState(t, 6, "RUNNING")
				devs := d.waitSlice(t, func(devs []resourceapi.Device) bool { return len(devs) == 8 && len(devs[6].Taints) == 1 })
				require.Equal(t, "xpu.baidu.com/unhealthy", devs[6].Taints[0].Key)
				require.Equal(t, "ERROR", devs[6].Taints[0].Value)
				require.Equal(t, resourceapi.DeviceTaintEffectNoSchedule, devs[6].Taints[0].Effect)
				d.ApplyObjects(t, claimTemplate("six", 1, false, `device.attributes["xpu.baidu.com"].index == 6`))
				d.ApplyObjects(t, xpuPod("dra-six", img, "template:six"))
				d.waitPending(t, "dra-six")
				d.ApplyObjects(t, claimTemplate("eight", 8, false))
				d.ApplyObjects(t, xpuPod("dra-eight", img, "template:eight"))
				d.waitPending(t, "dra-eight")
				d.deletePod(t, "dra-eight")
				// It recovers: the taint goes and the waiting pod runs on it.
				d.setState(t, 6, "RUNNING")
				d.waitSlice(t, func(devs []resourceapi.Device) bool { return len(devs) == 8 && len(devs[6].Taints) == 0 })
				d.WaitPodRunning(t, "default", "dra-six", podTimeout)
				require.Equal(t, []int{6}, d.allocated(t, "dra-six"))
				d.deletePod(t, "dra-six")
			})

			t.Run("restarting the driver then the kubelet", func(t *testing.T) {
				// The pods of the subtests before are gone; their claims
				// are unprepared as the kubelet gets to them.
				d.waitUnprepared(t, "the pods before deleted")
				d.ApplyObjects(t, claimTemplate("stay", 1, false))
				d.ApplyObjects(t, xpuPod("dra-stay", img, "template:stay"))
				pod := d.WaitPodRunning(t, "default", "dra-stay", podTimeout)
				idx := d.allocated(t, "dra-stay")
				recs := d.records(t)
				require.Len(t, recs, 1)
				container := pod.Status.ContainerStatuses[0].ContainerID

				old := d.driverPod(t)
				zero := int64(0)
				require.NoError(t, d.Client.CoreV1().Pods(old.Namespace).Delete(context.Background(), old.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
				testutil.Eventually(t, func(t testing.TB) bool {
					p := d.driverPod(t)
					return p.Name != old.Name && strings.Contains(d.Logs(t, p.Namespace, p.Name, "xpu-dra-driver"), "publishing 8 XPU(s)")
				}, podTimeout, 500*time.Millisecond, "the DaemonSet did not bring the driver back")
				d.RestartKubelet(t)

				pod = d.WaitPodRunning(t, "default", "dra-stay", podTimeout)
				require.Equal(t, container, pod.Status.ContainerStatuses[0].ContainerID, "the pod's container survived")
				require.Equal(t, recs, d.records(t), "the claim is still prepared, once")
				require.Equal(t, idx, d.allocated(t, "dra-stay"))
				// The restarted kubelet serves exec once it has synced the pod again.
				testutil.Eventually(t, func(t testing.TB) bool { return d.Exec(t, "default", "dra-stay", "main", "true").Success() },
					podTimeout, 500*time.Millisecond, "exec into dra-stay after the kubelet restart")
				d.seesExactly(t, "dra-stay", idx...)
				// The restarted driver still unprepares it.
				d.deletePod(t, "dra-stay")
				d.waitUnprepared(t, "dra-stay deleted")
			})

			t.Run("baidu.com/xpu: 1 through the extended resource", func(t *testing.T) {
				d.ApplyObjects(t, limitsPod("dra-extended", img, "baidu.com/xpu"))
				d.WaitPodRunning(t, "default", "dra-extended", podTimeout)
				idx := d.allocated(t, "dra-extended")
				require.Len(t, idx, 1)
				d.seesExactly(t, "dra-extended", idx...)
				d.deletePod(t, "dra-extended")
			})

			t.Run("the policy keeps the driver to its node's slices", func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "slice.yaml")
				require.NoError(t, os.WriteFile(path, []byte(`apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: other-node-xpu
spec:
  driver: xpu.baidu.com
  nodeName: other-node
  pool: {name: other-node, resourceSliceCount: 1}
  devices: [{name: xpu-0}]
`), 0o600))
				r := d.Kubectl(t, "create", "--as", "system:serviceaccount:kube-system:xpu-dra-driver", "-f", path)
				require.False(t, r.Success(), r.String())
				// An impersonated account names no node: refused before any field.
				require.Contains(t, r.Stderr, "may not write ResourceSlices: only a pod's token bound to a node may", r.String())
				r = d.Kubectl(t, "create", "-f", path)
				require.True(t, r.Success(), "the admin is not restricted: %s", r.String())
				d.MustKubectl(t, "delete", "resourceslice", "other-node-xpu")
			})
		})
	}
}
