package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestDevicePluginPartitions deploys deployments/xpu-device-plugin.yaml
// (the default partition strategy, mixed) on the private cluster
// (containerd 2.x) with a fake host whose first P800 is cut in four: the
// node advertises baidu.com/xpu-24gb 4 and baidu.com/xpu 1 (the whole
// card), and a pod asking for baidu.com/xpu-24gb: 1 runs with exactly one
// of the VFs: its /dev/xpuM and /dev/xpuctrl, not the PF, not the whole
// card. What the test changes in the DaemonSet is what TestKubeletDaemonSet
// changes.
func TestDevicePluginPartitions(t *testing.T) {
	harness.RequiresRoot(t)
	tree := FakeHost(t, fakehost.P800Quarters())
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "deployments", "xpu-device-plugin.yaml"))
	require.NoError(t, err)
	var ds appsv1.DaemonSet
	require.NoError(t, yaml.UnmarshalStrict(data, &ds))
	var labels []string
	for k, v := range ds.Spec.Template.Spec.NodeSelector {
		if k != "kubernetes.io/os" {
			labels = append(labels, k+"="+v)
		}
	}
	if a := ds.Spec.Template.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		e := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
		labels = append(labels, e.Key+"="+e.Values[0])
	}
	c := harness.NewCluster(t, harness.WithClusterRuntime(clusterRuntimes[0].start), harness.WithNodeLabels(labels...))
	vendor := harness.UniqueVendor(t)
	c.Runtime.WriteSpec(t, GenerateSpec(t, tree, vendor), vendor)
	image := c.BusyboxImage(t)

	rootfs := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "usr", "bin"), 0o755))
	for _, name := range []string{"xpu-cdi", "xpu-device-plugin"} {
		data, err := os.ReadFile(Binary(t, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(rootfs, "usr", "bin", name), data, 0o755))
	}
	pluginImage := c.ImportImage(t, rootfs, "xpu-cdi-e2e-plugin", harness.WithImageCmd("/usr/bin/xpu-device-plugin"))
	spec := &ds.Spec.Template.Spec
	spec.HostNetwork = true
	ctr := &spec.Containers[0]
	ctr.Image, ctr.ImagePullPolicy = pluginImage, corev1.PullNever
	setEnv(ctr, corev1.EnvVar{Name: "XPU_CDI_VENDOR", Value: vendor}, corev1.EnvVar{Name: "XPU_CDI_POLL_INTERVAL", Value: "1s"})
	hostPaths := map[string]string{
		"/dev": tree.Path("/dev"), "/proc": tree.Path("/proc"), "/sys": tree.Path("/sys"),
		"/etc/cdi": c.SpecDir(), "/var/run/cdi": t.TempDir(),
	}
	for i := range spec.Volumes {
		if hp := spec.Volumes[i].HostPath; hp != nil {
			if p, ok := hostPaths[hp.Path]; ok {
				hp.Path = p
			}
		}
	}
	_, err = c.Client.AppsV1().DaemonSets(ds.Namespace).Create(testCtx(t), &ds, metav1.CreateOptions{})
	require.NoError(t, err)

	pod := waitDaemonSetPod(t, c, ds.Namespace, "app.kubernetes.io/name=xpu-device-plugin")
	logs := func() string { return c.Logs(t, ds.Namespace, pod.Name, "xpu-device-plugin") }
	require.Eventually(t, func() bool {
		l := logs()
		return strings.Contains(l, "registered baidu.com/xpu-24gb with the kubelet") && strings.Contains(l, "registered baidu.com/xpu with the kubelet")
	}, podTimeout, 500*time.Millisecond, "the plugin did not register both resources")
	require.Contains(t, logs(), "partition strategy mixed")
	require.Contains(t, logs(), "advertising 4 baidu.com/xpu-24gb device(s), 4 healthy")
	require.Contains(t, logs(), "advertising 1 baidu.com/xpu device(s), 1 healthy")
	waitAllocatable(t, c, "baidu.com/xpu-24gb", "4")
	waitAllocatable(t, c, "baidu.com/xpu", "1")

	c.ApplyObjects(t, limitsPod("quarter", image, "baidu.com/xpu-24gb"))
	c.WaitPodRunning(t, "default", "quarter", podTimeout)
	idx := xpusOf(t, c, tree, "quarter")
	require.Len(t, idx, 1, "exactly one XPU in the pod")
	require.Contains(t, []int{1, 2, 3, 4}, idx[0], "a quarter of card 0000:03:00.0, not the PF (0) nor the whole card (5)")
	require.Contains(t, logs(), fmt.Sprintf("allocated baidu.com/xpu-24gb %d (cdi-cri)", idx[0]))

	c.ApplyObjects(t, limitsPod("whole", image, "baidu.com/xpu"))
	c.WaitPodRunning(t, "default", "whole", podTimeout)
	require.Equal(t, []int{5}, xpusOf(t, c, tree, "whole"), "baidu.com/xpu is the whole card")
}

// TestDRAPartitionClaim deploys xpu-dra-driver and the DeviceClasses from
// deployments/ on the private cluster (containerd 2.x) with the p800-sriov
// fake host (PF 0000:03:00.0 cut in two: xpu1, xpu2 of 48 GiB; a whole
// P800 xpu3): the slice has the partitions with their memory, fraction and
// parent, not the PF; with the whole card taken, a claim asking for at
// least 40Gi gets a 48 GB partition and its container sees exactly that
// VF; the class xpu-48gb.baidu.com gives the other half; a claim of the
// class xpu-24gb.baidu.com stays Pending (no card is cut in four).
func TestDRAPartitionClaim(t *testing.T) {
	harness.RequiresRoot(t)
	d := startDRAOn(t, clusterRuntimes[0].start, fakehost.P800SRIOV(), 3)
	img := d.image

	devs := d.waitSlice(t, func(devs []resourceapi.Device) bool { return len(devs) == 3 })
	memory := func(dev resourceapi.Device) resource.Quantity { return dev.Capacity["memory"].Value }
	for _, dev := range devs[:2] {
		require.Contains(t, []string{"xpu-1", "xpu-2"}, dev.Name)
		require.Equal(t, "1/2", *dev.Attributes["partition"].StringValue, dev.Name)
		require.Equal(t, "0000:03:00.0", *dev.Attributes["parentPCIBusID"].StringValue, dev.Name)
		q := memory(dev)
		require.Zero(t, q.Cmp(resource.MustParse("48Gi")), "%s: %s", dev.Name, q.String())
	}
	require.Equal(t, "xpu-3", devs[2].Name)
	require.NotContains(t, devs[2].Attributes, resourceapi.QualifiedName("partition"))

	d.ApplyObjects(t, claimTemplate("whole-card", 1, false, `!("partition" in device.attributes["xpu.baidu.com"])`))
	d.ApplyObjects(t, xpuPod("dra-whole", img, "template:whole-card"))
	d.WaitPodRunning(t, "default", "dra-whole", podTimeout)
	require.Equal(t, []int{3}, d.allocated(t, "dra-whole"))

	d.ApplyObjects(t, claimTemplate("at-least-40gi", 1, false, `device.capacity["xpu.baidu.com"].memory.compareTo(quantity("40Gi")) >= 0`))
	d.ApplyObjects(t, xpuPod("dra-40gi", img, "template:at-least-40gi"))
	d.WaitPodRunning(t, "default", "dra-40gi", podTimeout)
	half := d.allocated(t, "dra-40gi")
	require.Len(t, half, 1)
	require.Contains(t, []int{1, 2}, half[0], "a 48 GB partition")
	seesOnly(t, d, "dra-40gi", half[0])

	d.ApplyObjects(t, classClaimTemplate("one-half", "xpu-48gb.baidu.com"), classClaimTemplate("one-quarter", "xpu-24gb.baidu.com"))
	d.ApplyObjects(t, xpuPod("dra-half", img, "template:one-half"))
	d.WaitPodRunning(t, "default", "dra-half", podTimeout)
	other := d.allocated(t, "dra-half")
	require.Equal(t, []int{3 - half[0]}, other, "the other half")
	seesOnly(t, d, "dra-half", other[0])

	d.ApplyObjects(t, xpuPod("dra-quarter", img, "template:one-quarter"))
	msg := d.waitPending(t, "dra-quarter")
	require.Contains(t, msg, "cannot allocate all claims", msg)
	for _, p := range []string{"dra-quarter", "dra-half", "dra-40gi", "dra-whole"} {
		d.deletePod(t, p)
	}
}

// seesOnly checks that the pod's container has exactly the XPU idx: its
// node with the host's major:minor, /dev/xpuctrl and its variable, nothing
// else. (The driver 5.x host's XRE has libxpurt.so.2, which xpu-test of
// seesExactly is not linked against: TestXRE5Containers runs that.)
func seesOnly(t *testing.T, d *draCluster, podName string, idx int) {
	t.Helper()
	r := d.Exec(t, "default", podName, "main", "sh", "-c", listXPUs)
	require.True(t, r.Success(), r.String())
	nodes, env := parseNodes(t, r.Stdout)
	wantNodes, wantEnv := expect(d.tree, idx)
	require.Equal(t, wantNodes, nodes, "pod %s", podName)
	require.Equal(t, wantEnv, env, "pod %s", podName)
}
