package e2e

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// driverOnlyP800 is a driver-only node after a reboot: P800SRIOV's box
// (driver 5.x, two P800 with sriov_totalvfs 4, 0000:03:00.0 as /dev/xpu0
// and 0000:83:00.0 as /dev/xpu3) with both cards whole.
func driverOnlyP800() fakehost.Host {
	h := fakehost.P800SRIOV()
	h.Devices = slices.DeleteFunc(h.Devices, func(d fakehost.Device) bool { return d.Function != fakehost.FunctionPF })
	return h
}

// partitionNode is a test cluster node with driverOnlyP800 under the fake
// SR-IOV kernel and the chart's image imported.
type partitionNode struct {
	c        *harness.Cluster
	tree     *fakehost.Tree
	kernel   *fakehost.SRIOVKernel
	specFile string
	features string
	values   []string
}

func newPartitionNode(t *testing.T, c *harness.Cluster) *partitionNode {
	t.Helper()
	rootfs := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "usr", "bin"), 0o755))
	for _, name := range []string{"xpu-cdi", "xpu-runtime-hook", "xpu-device-plugin", "xpu-dra-driver"} {
		data, err := os.ReadFile(Binary(t, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(rootfs, "usr", "bin", name), data, 0o755))
	}
	c.ImportImage(t, rootfs, "localhost/xpu-cdi:e2e", harness.WithImageCmd("/usr/bin/xpu-device-plugin"))

	n := &partitionNode{c: c, tree: FakeHost(t, driverOnlyP800())}
	// Started before the chart: the installer's / (no propagation on
	// containerd) holds the kernel's mounts from its start.
	n.kernel = fakehosttest.StartSRIOV(t, n.tree, fakehost.SRIOVOptions{})
	vendor := harness.UniqueVendor(t)
	n.specFile = filepath.Join(c.SpecDir(), vendor+"-xpu.yaml")
	n.features = filepath.Join(t.TempDir(), "features.d")
	require.NoError(t, os.Mkdir(n.features, 0o755))
	n.values = append(installerPropagation(c),
		"image.repository=localhost/xpu-cdi", "image.tag=e2e", "image.pullPolicy=Never", "hostNetwork=true",
		"installer.hookDir="+filepath.Join(t.TempDir(), "opt", "xpu-cdi", "bin"), "cdi.specFile="+n.specFile,
		"installer.interval=1s", "cdi.vendor="+vendor, "devicePlugin.healthCheckInterval=1s",
		"labels.featuresDir="+n.features, "host.devRoot="+n.tree.Root, "host.driverRoot="+n.tree.Root,
		"exporter.enabled=false",
	)
	return n
}

// numVFs is the VF count of every PF the fake kernel serves, by address.
func (n *partitionNode) numVFs() map[string]int {
	out := map[string]int{}
	for _, pf := range n.kernel.PFs() {
		out[pf] = n.kernel.NumVFs(pf)
	}
	return out
}

// specNames are the device names of the node's spec; nil while there is
// none.
func (n *partitionNode) specNames() []string {
	data, err := os.ReadFile(n.specFile)
	if err != nil {
		return nil
	}
	spec, err := cdispec.Parse(data)
	if err != nil {
		return nil
	}
	var names []string
	for _, d := range spec.Devices {
		names = append(names, d.Name)
	}
	return names
}

// waitLayout waits until both cards have vfs VFs and the spec names
// exactly their VFs by PCI address (functions 1..vfs of each PF's bus),
// the PFs not at all.
func (n *partitionNode) waitLayout(t *testing.T, vfs int) {
	t.Helper()
	want := map[string]int{"0000:03:00.0": vfs, "0000:83:00.0": vfs}
	var names []string
	ok := waitFor(2*podTimeout, func() bool {
		names = n.specNames()
		if !maps.Equal(n.numVFs(), want) {
			return false
		}
		for _, bus := range []string{"0000:03:00", "0000:83:00"} {
			if slices.Contains(names, bus+".0") == (vfs > 0) {
				return false
			}
			for f := 1; f <= 4; f++ {
				if slices.Contains(names, bus+"."+strconv.Itoa(f)) != (f <= vfs) {
					return false
				}
			}
		}
		return true
	})
	require.True(t, ok, "cards %v (want %v), spec names %v; installer:\n%s", n.numVFs(), want, names,
		n.c.Kubectl(t, "logs", "--namespace", "xpu-system", "--selector", "app.kubernetes.io/name=xpu-cdi-installer", "--tail", "30").String())
}

func waitFor(timeout time.Duration, ok func() bool) bool {
	for end := time.Now().Add(timeout); ; time.Sleep(250 * time.Millisecond) {
		if ok() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// layoutRequestLabel is the node label that asks the installer for a
// node's layout (labels.PartitionLayoutRequest, spelt out here so that a
// rename shows in this test).
const layoutRequestLabel = "node-restriction.kubernetes.io/baidu.com-xpu.partition-layout"

// TestHelmPartitionLayout installs the chart with partitions.layout=all=4
// on a driver-only node whose two P800 cards are whole, under the fake
// SR-IOV kernel: the installer (a pod without capabilities, writing
// sriov_numvfs through its /host) cuts both cards into quarters and writes
// the spec with the 8 VFs; the node label
// node-restriction.kubernetes.io/baidu.com-xpu.partition-layout=all-2
// (a prefix the node's kubelet may not set) makes it halves, and taking
// the label off brings the chart's layout back. The labels file counts the
// partitions and leaves the layout label to the admin. On containerd 2.x.
func TestHelmPartitionLayout(t *testing.T) {
	harness.RequiresRoot(t)
	helm := helmBinary(t)
	c := harness.NewCluster(t, harness.WithClusterRuntime(clusterRuntimes[0].start), harness.WithNodeLabels("baidu.com/xpu.present=true"))
	n := newPartitionNode(t, c)
	require.Equal(t, map[string]int{"0000:03:00.0": 0, "0000:83:00.0": 0}, n.numVFs())

	rel := &helmRelease{c: c, helm: helm, name: "xpu-partitions", values: append(n.values,
		"devicePlugin.enabled=false", "partitions.layout=all=4", "partitions.labelInterval=1s",
		// Named layouts the node label may name (name.NAME).
		`partitions.layouts.whole=all=0`, `partitions.layouts.mixed=0000:03:00.0=2\,0000:83:00.0=4`,
		// The installer's PodResources socket: the test kubelet's root
		// directory (its device plugin directory is the fixed
		// /var/lib/kubelet/device-plugins, hence not with the plugin).
		"host.kubeletDir="+c.KubeletRootDir,
		"installer.apiServer.host=127.0.0.1", "installer.apiServer.port="+strconv.Itoa(c.APIServerPort))}
	rel.install(t)
	n.waitLayout(t, 4)
	labels, err := os.ReadFile(filepath.Join(n.features, "xpu-cdi"))
	require.NoError(t, err)
	require.Contains(t, string(labels), "baidu.com/xpu-24gb.count=8\n")
	require.NotContains(t, string(labels), "baidu.com/xpu.partition-layout=", "the node label is the admin's")
	for _, w := range n.kernel.Writes() {
		require.Zero(t, w.Errno, "write %q to %s", w.Value, w.PF)
	}

	// The node label overrides the chart's layout on this node.
	c.MustKubectl(t, "label", "node", c.Node, layoutRequestLabel+"=all-2", "--overwrite")
	t.Cleanup(func() { c.Kubectl(t, "label", "node", c.Node, layoutRequestLabel+"-") })
	n.waitLayout(t, 2)
	require.True(t, waitFor(podTimeout, func() bool {
		data, _ := os.ReadFile(filepath.Join(n.features, "xpu-cdi"))
		return strings.Contains(string(data), "baidu.com/xpu-48gb.count=4\n") && !strings.Contains(string(data), "24gb")
	}), "the labels count the halves")
	node, err := c.Client.CoreV1().Nodes().Get(context.Background(), c.Node, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "all-2", node.Labels[layoutRequestLabel], "nothing wrote over the admin's label")

	// A label that is no layout changes nothing.
	writes := len(n.kernel.Writes())
	c.MustKubectl(t, "label", "node", c.Node, layoutRequestLabel+"=all-3", "--overwrite")
	time.Sleep(3 * time.Second) // three installer passes
	require.Len(t, n.kernel.Writes(), writes, "all-3 is not a P800 layout: nothing written")
	require.Equal(t, map[string]int{"0000:03:00.0": 2, "0000:83:00.0": 2}, n.numVFs())

	// The label names a layout of partitions.layouts: a layout with PCI
	// addresses, and the whole cards.
	c.MustKubectl(t, "label", "node", c.Node, layoutRequestLabel+"=name.mixed", "--overwrite")
	require.True(t, waitFor(2*podTimeout, func() bool {
		return maps.Equal(n.numVFs(), map[string]int{"0000:03:00.0": 2, "0000:83:00.0": 4})
	}), "name.mixed: %v", n.numVFs())
	c.MustKubectl(t, "label", "node", c.Node, layoutRequestLabel+"=name.whole", "--overwrite")
	n.waitLayout(t, 0)
	// A name the file does not have changes nothing.
	writes = len(n.kernel.Writes())
	c.MustKubectl(t, "label", "node", c.Node, layoutRequestLabel+"=name.halves", "--overwrite")
	time.Sleep(3 * time.Second) // three installer passes
	require.Len(t, n.kernel.Writes(), writes, "name.halves is not in partitions.layouts: nothing written")

	// The label gone: the chart's layout again.
	c.MustKubectl(t, "label", "node", c.Node, layoutRequestLabel+"-")
	n.waitLayout(t, 4)
	rel.uninstall(t)
}

// TestPartitionApplyInUse: on the test cluster, with the chart's device
// plugin serving the two whole P800 of a driver-only node, a pod is given
// one card. `xpu-cdi partition apply` on the host, asking the kubelet's
// PodResources socket, refuses to re-lay-out that card, naming the pod,
// and writes nothing; once the pod is gone the same command goes through
// and the card has its VFs. On containerd 2.x.
func TestPartitionApplyInUse(t *testing.T) {
	harness.RequiresRoot(t)
	helm := helmBinary(t)
	c := harness.NewCluster(t, harness.WithClusterRuntime(clusterRuntimes[0].start), harness.WithNodeLabels("baidu.com/xpu.present=true"))
	busybox := c.BusyboxImage(t)
	n := newPartitionNode(t, c)
	rel := &helmRelease{c: c, helm: helm, name: "xpu-inuse", values: n.values}
	rel.install(t)
	waitAllocatable(t, c, "baidu.com/xpu", "2")

	c.ApplyObjects(t, limitsPod("xpu-holder", busybox, "baidu.com/xpu"))
	c.WaitPodRunning(t, "default", "xpu-holder", podTimeout)
	idx := xpusOf(t, c, n.tree, "xpu-holder")
	require.Len(t, idx, 1)
	held := strconv.Itoa(idx[0]) // the card's index: its PF's /dev/xpuN

	apply := []string{
		"partition", "apply", "--layout", held + "=2", "--dev-root", n.tree.Root, "--driver-root", n.tree.Root,
		"--pod-resources-socket", filepath.Join(c.KubeletRootDir, "pod-resources", "kubelet.sock"),
	}
	before := n.numVFs()
	stdout, stderr, err := runXPUCDI(t, apply...)
	require.Error(t, err, "apply on a card a pod holds must be refused:\n%s\n%s", stdout, stderr)
	require.Contains(t, stdout+stderr, "pod default/xpu-holder", "the refusal names the pod")
	t.Logf("refused:\n%s%s", stdout, stderr)
	require.Empty(t, n.kernel.Writes(), "a refused layout writes nothing")
	require.Equal(t, before, n.numVFs())

	c.MustKubectl(t, "delete", "pod", "xpu-holder", "--namespace", "default", "--wait")
	// The kubelet forgets the pod's devices once it is gone.
	testutil.Eventually(t, func(t testing.TB) bool {
		stdout, stderr, err := runXPUCDI(t, apply...)
		return assert.NoError(t, err, "%s%s", stdout, stderr)
	}, podTimeout, 250*time.Millisecond, "apply once the pod is gone")
	after := n.numVFs()
	for pf, vfs := range after {
		if vfs != before[pf] {
			require.Equal(t, 2, vfs, "%s: the card that was held", pf)
		}
	}
	require.NotEqual(t, before, after, "the held card was laid out")
	rel.uninstall(t)
}
