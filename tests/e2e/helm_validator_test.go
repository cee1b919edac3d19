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
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// glibcTestImage imports a glibc image (busybox, the host's loader and
// libc) into c and returns the chart values that make it the validator's
// tests.image: an XRE 5 xpu-smi, linked dynamically, runs in it.
func glibcTestImage(t *testing.T, c *harness.Cluster) []string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	rootfs := filepath.Join(dir, "rootfs")
	harness.BuildGlibcRootfs(t, rootfs)
	c.ImportImage(t, rootfs, "localhost/xpu-e2e-glibc:e2e", harness.WithImageCmd("sleep", "2147483647"))
	return []string{"tests.image.repository=localhost/xpu-e2e-glibc", "tests.image.tag=e2e", "tests.image.pullPolicy=Never"}
}

// podResourcesAtDefault bind-mounts the test kubelet's PodResources
// directory at /var/lib/kubelet/pod-resources, where a node's kubelet has
// it, until the test ends: the chart's device plugin registers in the fixed
// /var/lib/kubelet/device-plugins, so host.kubeletDir stays the default and
// the installer's in-use check looks for the socket below it.
func podResourcesAtDefault(t *testing.T, c *harness.Cluster) {
	t.Helper()
	dst := "/var/lib/kubelet/pod-resources"
	if entries, err := os.ReadDir(dst); err == nil && len(entries) > 0 {
		t.Fatalf("%s holds %d entries: a kubelet of this machine serves it", dst, len(entries))
	}
	require.NoError(t, os.MkdirAll(dst, 0o750))
	require.NoError(t, unix.Mount(filepath.Join(c.KubeletRootDir, "pod-resources"), dst, "", unix.MS_BIND, ""))
	t.Cleanup(func() {
		if err := unix.Unmount(dst, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dst, err)
		}
		_ = os.Remove(dst)
	})
}

// TestHelmTestPartitions: helm test on a node whose cards the chart's
// installer lays out (driverOnlyP800 under the fake SR-IOV kernel: XRE 5,
// its xpu-smi linked dynamically). With the device plugin and
// partitions.layout=all=4 the node offers no whole card: the validator asks
// for baidu.com/xpu-24gb. With the DRA driver and all=2 it asks through a
// ResourceClaimTemplate (no DRAExtendedResource gate needed). In both it
// gets one VF and /dev/xpuctrl and runs xpu-smi in tests.image (glibc)
// with the libraries the spec gives. On containerd 2.x.
func TestHelmTestPartitions(t *testing.T) {
	harness.RequiresRoot(t)
	helm := helmBinary(t)
	c := harness.NewCluster(t, harness.WithClusterRuntime(clusterRuntimes[0].start), harness.WithNodeLabels("baidu.com/xpu.present=true"))
	n := newPartitionNode(t, c)
	base := slices.Clip(append(append(slices.Clone(n.values), glibcTestImage(t, c)...),
		"partitions.labelInterval=1s",
		"installer.apiServer.host=127.0.0.1", "installer.apiServer.port="+strconv.Itoa(c.APIServerPort)))

	t.Run("device plugin", func(t *testing.T) {
		podResourcesAtDefault(t, c)
		rel := &helmRelease{c: c, helm: helm, name: "xpu-dp-parts", values: append(base, "partitions.layout=all=4")}
		rel.install(t)
		n.waitLayout(t, 4)
		waitAllocatable(t, c, "baidu.com/xpu-24gb", "8")
		logs := rel.test(t)
		require.Contains(t, logs, "ok   1 XPU device node(s) [/dev/xpu")
		require.Contains(t, logs, "ok   /dev/xpuctrl")
		require.Contains(t, logs, "ok   xpu-smi ")
		require.Contains(t, logs, " (ran: ", "XRE 5's xpu-smi ran")
		rel.uninstall(t)
	})

	t.Run("DRA", func(t *testing.T) {
		rel := &helmRelease{c: c, helm: helm, name: "xpu-dra-parts", values: append(base,
			"partitions.layout=all=2", "devicePlugin.enabled=false", "dra.enabled=true", "dra.healthCheckInterval=500ms",
			"host.kubeletDir="+c.KubeletRootDir,
			"dra.apiServer.host=127.0.0.1", "dra.apiServer.port="+strconv.Itoa(c.APIServerPort))}
		rel.install(t)
		n.waitLayout(t, 2)
		require.Eventually(t, func() bool {
			list, err := c.Client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return false
			}
			for _, s := range list.Items {
				if s.Spec.Driver == "xpu.baidu.com" && len(s.Spec.Devices) == 4 {
					return true
				}
			}
			return false
		}, podTimeout, 250*time.Millisecond, "the slice of the 4 halves")
		logs := rel.test(t)
		require.Contains(t, logs, "ok   1 XPU device node(s) [/dev/xpu")
		require.Contains(t, logs, "ok   /dev/xpuctrl")
		require.Contains(t, logs, " (ran: ", "XRE 5's xpu-smi ran")
		rel.uninstall(t)
	})
}
