package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestHelmChartDRA installs deployments/helm/xpu-cdi with the installer and
// the DRA driver (devicePlugin off) on a node that has only a Kunlun driver
// tree (a fake P800 host with real device nodes) and no xpu-cdi files: the
// installer writes the hook and the spec, the driver publishes the 8 XPUs,
// a pod with a ResourceClaimTemplate for one XPU of the chart's class runs
// with exactly the XPU of its allocation, and a baidu.com/xpu pod is served
// through the class's extended resource. helm uninstall then leaves the
// node's files as they were and the node's slice goes. What the test sets,
// besides what TestHelmChart sets: the kubelet's root (the test kubelet's)
// and the API server on loopback (no service routing in the test cluster).
// On containerd 2.x and CRI-O.
func TestHelmChartDRA(t *testing.T) {
	harness.RequiresRoot(t)
	helm := helmBinary(t)
	for _, rt := range clusterRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			c := harness.NewCluster(t, harness.WithClusterRuntime(rt.start), harness.WithNodeLabels("baidu.com/xpu.present=true"))
			busybox := c.BusyboxImage(t)
			ch := newDRAChart(t, c, helm)
			tree, rel := ch.tree, ch.rel
			before := nodeFiles(t, ch.base, ch.features, c.SpecDir(), tree.Root)
			start := time.Now()
			rel.install(t)
			d := ch.draCluster()
			d.waitSlice(t, func(devs []resourceapi.Device) bool { return len(devs) == 8 })
			t.Logf("helm install --wait and the slice of 8 XPUs: %s", time.Since(start).Round(time.Millisecond))
			classes, err := c.Client.ResourceV1().DeviceClasses().List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			var names []string
			for _, dc := range classes.Items {
				names = append(names, dc.Name)
			}
			require.ElementsMatch(t, []string{
				"xpu.baidu.com", "kunlun1.xpu.baidu.com", "kunlun2.xpu.baidu.com", "kunlun3.xpu.baidu.com",
				"xpu-48gb.baidu.com", "xpu-24gb.baidu.com", "xpu-16gb.baidu.com", "xpu-8gb.baidu.com", "xpu-5gb.baidu.com",
			}, names)

			t.Run("helm test", func(t *testing.T) {
				logs := rel.test(t)
				require.Contains(t, logs, "ok   1 XPU device node(s) [/dev/xpu")
				require.Contains(t, logs, "ok   /dev/xpuctrl")
				require.Regexp(t, `ok   xpu-smi \S+ \(ran: `, logs)
				d.waitUnprepared(t, "the validator's claim")
			})

			t.Run("claim for one XPU", func(t *testing.T) {
				c.ApplyObjects(t, claimTemplate("one-xpu", 1, false))
				c.ApplyObjects(t, xpuPod("dra-one", busybox, "template:one-xpu"))
				c.WaitPodRunning(t, "default", "dra-one", podTimeout)
				got := d.allocated(t, "dra-one")
				require.Len(t, got, 1)
				require.Equal(t, got, xpusOf(t, c, tree, "dra-one"), "exactly the XPU of its allocation")
				require.Len(t, d.records(t), 1, "the claim is prepared")
				d.deletePod(t, "dra-one")
				d.waitUnprepared(t, "the pod deleted")
			})

			t.Run("extended resource", func(t *testing.T) {
				c.ApplyObjects(t, limitsPod("dra-ext", busybox, "baidu.com/xpu"))
				c.WaitPodRunning(t, "default", "dra-ext", podTimeout)
				got := d.allocated(t, "dra-ext")
				require.Len(t, got, 1)
				require.Equal(t, got, xpusOf(t, c, tree, "dra-ext"))
				d.deletePod(t, "dra-ext")
				d.waitUnprepared(t, "the pod deleted")
			})

			start = time.Now()
			rel.uninstall(t)
			t.Logf("helm uninstall --wait: %s", time.Since(start).Round(time.Millisecond))
			testutil.Eventually(t, func(t testing.TB) bool {
				return assert.Equal(t, before, nodeFiles(t, ch.base, ch.features, c.SpecDir(), tree.Root))
			}, podTimeout, 250*time.Millisecond, "helm uninstall leaves the node as it was")
			require.Eventually(t, func() bool {
				list, err := c.Client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
				if err != nil {
					return false
				}
				for _, s := range list.Items {
					if s.Spec.Driver == "xpu.baidu.com" {
						return false
					}
				}
				return true
			}, podTimeout, time.Second, "the node's ResourceSlice goes with the driver")
			t.Logf("uninstall to the node's files as they were and no slice: %s", time.Since(start).Round(time.Millisecond))
		})
	}
}

// draChart is the chart with the installer and the DRA driver (devicePlugin
// off) on a test cluster whose node has only a fake Kunlun driver tree (a
// P800 host with real device nodes), as TestHelmChartDRA installs it.
type draChart struct {
	c              *harness.Cluster
	rel            *helmRelease
	tree           *fakehost.Tree
	vendor         string
	base, features string // the host's /opt and NFD's features.d
}

// newDRAChart imports the image of the chart's pods into c and returns the
// release on a fake P800 host of 8 cards, not installed yet.
func newDRAChart(t *testing.T, c *harness.Cluster, helm string) *draChart {
	t.Helper()
	return newDRAChartOn(t, c, helm, FakeHost(t, fakehost.P800x8()))
}

// newDRAChartOn is newDRAChart on the fake host tree: the chart's devRoot
// and driverRoot.
func newDRAChartOn(t *testing.T, c *harness.Cluster, helm string, tree *fakehost.Tree) *draChart {
	t.Helper()
	rootfs := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "usr", "bin"), 0o755))
	for _, name := range []string{"xpu-cdi", "xpu-runtime-hook", "xpu-dra-driver", "xpu-exporter"} {
		data, err := os.ReadFile(Binary(t, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(rootfs, "usr", "bin", name), data, 0o755))
	}
	c.ImportImage(t, rootfs, "localhost/xpu-cdi:e2e", harness.WithImageCmd("/usr/bin/xpu-dra-driver"))

	ch := &draChart{c: c, tree: tree, vendor: harness.UniqueVendor(t), base: t.TempDir(), features: filepath.Join(t.TempDir(), "features.d")}
	require.NoError(t, os.Mkdir(ch.features, 0o755))
	specFile := filepath.Join(c.SpecDir(), ch.vendor+"-xpu.yaml")
	hookDir := filepath.Join(ch.base, "opt", "xpu-cdi", "bin")
	ch.rel = &helmRelease{c: c, helm: helm, name: "xpu", values: append(installerPropagation(c),
		"image.repository=localhost/xpu-cdi", "image.tag=e2e", "image.pullPolicy=Never", "hostNetwork=true",
		"installer.hookDir="+hookDir, "cdi.specFile="+specFile, "installer.interval=1s",
		"host.devRoot="+ch.tree.Root, "host.driverRoot="+ch.tree.Root,
		"devicePlugin.enabled=false", "cdi.vendor="+ch.vendor, "labels.featuresDir="+ch.features,
		"dra.enabled=true", "dra.healthCheckInterval=500ms", "host.kubeletDir="+c.KubeletRootDir,
		"dra.apiServer.host=127.0.0.1", "dra.apiServer.port="+strconv.Itoa(c.APIServerPort),
	)}
	exporter, _ := exporterValues(c, harness.FreePort(t))
	ch.rel.values = append(append(ch.rel.values, exporter...), glibcTestImage(t, c)...)
	// The exporter's admin-access claim (its default under DRA) is allowed
	// only in a namespace with this label.
	c.MustKubectl(t, "create", "namespace", "xpu-system")
	c.MustKubectl(t, "label", "namespace", "xpu-system", "resource.kubernetes.io/admin-access=true")
	return ch
}

// draCluster is the view of the installed driver the DRA tests use.
func (ch *draChart) draCluster() *draCluster {
	return &draCluster{Cluster: ch.c, tree: ch.tree, vendor: ch.vendor, dataDir: filepath.Join(ch.c.PluginsDir(), "xpu.baidu.com")}
}
