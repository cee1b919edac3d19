package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestHelmChartDRADynamic installs deployments/helm/xpu-cdi with the DRA
// driver in dynamic partitions mode (dra.partitions.mode=dynamic) on a node
// of 2 whole P800 cards served by the fake SR-IOV kernel, with
// DRADeviceCompatibilityGroups on: the driver runs in the chart's pod, with
// the mounts and capabilities the chart gives it in that mode, on a real
// kubelet. It publishes every way of cutting both cards; a pod asking for a
// half runs, its card is cut into 2 VFs (the fake kernel's sriov_numvfs),
// the other card stays whole, and the pod's container has exactly its VF's
// node. The chart points at the fake tree as TestHelmChartDRA does
// (host.devRoot, host.driverRoot), the tree on which the fake kernel serves
// the PFs' sysfs. What the fake tree cannot show (tests/e2e/README.md): the
// FUSE mounts of the PFs are below the chart's /sys hostPath, which a
// read-only mount does not reach; the in-use check reads the fake tree's
// /proc, not the host's; this host has no AppArmor.
func TestHelmChartDRADynamic(t *testing.T) {
	harness.RequiresRoot(t)
	helm := helmBinary(t)
	tree := FakeHost(t, p800Cards(2))
	// Started before the cluster: closed after it, once the driver's pod
	// is gone.
	kernel := fakehosttest.StartSRIOV(t, tree, fakehost.SRIOVOptions{})
	c := harness.NewCluster(t, harness.WithClusterRuntime(clusterRuntimes[0].start),
		harness.WithNodeLabels("baidu.com/xpu.present=true"), harness.WithFeatureGates(dynamicGate))
	ch := newDRAChartOn(t, c, helm, tree)
	ch.rel.values = append(ch.rel.values, "dra.partitions.mode=dynamic")
	start := time.Now()
	ch.rel.install(t)
	d := &dynNode{draCluster: ch.draCluster(), kernel: kernel}
	d.image = c.BusyboxImage(t)
	d.waitPublished(t, 2)
	t.Logf("helm install --wait and the slice of 2 cards' 14 devices: %s", time.Since(start).Round(time.Millisecond))
	require.Equal(t, []int{0, 0}, d.numVFs(), "both cards whole before any claim")

	d.ApplyObjects(t, claimTemplate("half", 1, false, selHalf))
	d.ApplyObjects(t, xpuPod("dyn-half", d.image, "template:half"))
	d.WaitPodRunning(t, "default", "dyn-half", podTimeout)
	h := d.allocatedSlot(t, "dyn-half")
	require.Equal(t, 2, h.count, "the half: %s", h.name)
	want := []int{0, 0}
	want[h.card] = 2
	require.Equal(t, want, d.numVFs(), "the half's card cut in two, the other whole")
	require.Equal(t, []string{"2"}, d.writesTo(h.card))
	d.seesSlot(t, "dyn-half", h)
	require.Len(t, d.records(t), 1, "the claim is prepared")

	d.deletePod(t, "dyn-half")
	d.waitUnprepared(t, "the pod deleted")
	require.Equal(t, want, d.numVFs(), "the idle card keeps its VFs (dra.partitions.idleLayout keep)")
	ch.rel.uninstall(t)
}
