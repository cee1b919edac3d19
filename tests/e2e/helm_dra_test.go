package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
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
	helm := filepath.Join(harness.ToolsBin(), "helm")
	if _, err := os.Stat(helm); err != nil {
		helm = harness.RequiresTool(t, "helm")
	}
	for _, rt := range clusterRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			c := harness.NewCluster(t, harness.WithClusterRuntime(rt.start), harness.WithNodeLabels("baidu.com/xpu.present=true"))
			busybox := c.BusyboxImage(t)
			rootfs := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "usr", "bin"), 0o755))
			for _, name := range []string{"xpu-cdi", "xpu-runtime-hook", "xpu-dra-driver", "xpu-exporter"} {
				data, err := os.ReadFile(Binary(t, name))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(rootfs, "usr", "bin", name), data, 0o755))
			}
			c.ImportImage(t, rootfs, "localhost/xpu-cdi:e2e", harness.WithImageCmd("/usr/bin/xpu-dra-driver"))

			tree := FakeHost(t, fakehost.P800x8())
			vendor := harness.UniqueVendor(t)
			base := t.TempDir() // stands for the host's /opt
			features := filepath.Join(t.TempDir(), "features.d")
			require.NoError(t, os.Mkdir(features, 0o755))
			specFile := filepath.Join(c.SpecDir(), vendor+"-xpu.yaml")
			hookDir := filepath.Join(base, "opt", "xpu-cdi", "bin")
			before := nodeFiles(t, base, features, c.SpecDir(), tree.Root)

			rel := &helmRelease{c: c, helm: helm, name: "xpu", values: append(installerPropagation(c),
				"image.repository=localhost/xpu-cdi", "image.tag=e2e", "image.pullPolicy=Never", "hostNetwork=true",
				"installer.hookDir="+hookDir, "installer.specFile="+specFile, "installer.interval=1s",
				"installer.devRoot="+tree.Root, "installer.driverRoot="+tree.Root,
				"devicePlugin.enabled=false", "devicePlugin.cdiVendor="+vendor, "labels.featuresDir="+features,
				"dra.enabled=true", "dra.healthCheckInterval=500ms", "dra.kubeletDir="+c.KubeletRootDir,
				"dra.apiServer.host=127.0.0.1", "dra.apiServer.port="+strconv.Itoa(c.APIServerPort),
			)}
			exporter, _ := exporterValues(c, harness.FreePort(t))
			rel.values = append(rel.values, exporter...)
			start := time.Now()
			rel.install(t)
			d := &draCluster{Cluster: c, tree: tree, vendor: vendor, dataDir: filepath.Join(c.PluginsDir(), "xpu.baidu.com")}
			d.waitSlice(t, func(devs []resourceapi.Device) bool { return len(devs) == 8 })
			t.Logf("helm install --wait and the slice of 8 XPUs: %s", time.Since(start).Round(time.Millisecond))
			classes, err := c.Client.ResourceV1().DeviceClasses().List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			var names []string
			for _, dc := range classes.Items {
				names = append(names, dc.Name)
			}
			require.ElementsMatch(t, []string{"xpu.baidu.com", "kunlun1.xpu.baidu.com", "kunlun2.xpu.baidu.com", "kunlun3.xpu.baidu.com"}, names)

			t.Run("claim for one XPU", func(t *testing.T) {
				c.Apply(t, claimTemplate("one-xpu", 1, false))
				c.Apply(t, xpuPod("dra-one", busybox, "template:one-xpu"))
				c.WaitPodRunning(t, "default", "dra-one", podTimeout)
				got := d.allocated(t, "dra-one")
				require.Len(t, got, 1)
				require.Equal(t, got, xpusOf(t, c, tree, "dra-one"), "exactly the XPU of its allocation")
				require.Len(t, d.records(t), 1, "the claim is prepared")
				d.deletePod(t, "dra-one")
				require.Eventually(t, func() bool { return len(d.records(t)) == 0 }, podTimeout, 250*time.Millisecond, "the claim is unprepared")
			})

			t.Run("extended resource", func(t *testing.T) {
				c.Apply(t, limitsPod("dra-ext", busybox, "baidu.com/xpu"))
				c.WaitPodRunning(t, "default", "dra-ext", podTimeout)
				got := d.allocated(t, "dra-ext")
				require.Len(t, got, 1)
				require.Equal(t, got, xpusOf(t, c, tree, "dra-ext"))
				d.deletePod(t, "dra-ext")
				require.Eventually(t, func() bool { return len(d.records(t)) == 0 }, podTimeout, 250*time.Millisecond, "the claim is unprepared")
			})

			start = time.Now()
			rel.uninstall(t)
			t.Logf("helm uninstall --wait: %s", time.Since(start).Round(time.Millisecond))
			require.Eventually(t, func() bool {
				return slices.Equal(before, nodeFiles(t, base, features, c.SpecDir(), tree.Root))
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
