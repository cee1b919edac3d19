package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestHelmUpgradeDRA (reliability of the DRA path) installs the chart with the DRA
// driver, then runs helm upgrade with a changed value that rolls the
// driver's DaemonSet while pods with claims for one XPU are created, one
// every second, before, during and after the roll. The new driver pod runs
// next to the old one (maxSurge 1, the helper's rolling-update sockets from
// POD_UID), and every pod starts with exactly the XPU of its allocation.
// On containerd 2.x.
func TestHelmUpgradeDRA(t *testing.T) {
	harness.RequiresRoot(t)
	helm := helmBinary(t)
	rt := clusterRuntimes[0]
	c := harness.NewCluster(t, harness.WithClusterRuntime(rt.start), harness.WithNodeLabels("baidu.com/xpu.present=true"))
	busybox := c.BusyboxImage(t)
	ch := newDRAChart(t, c, helm)
	ch.rel.install(t)
	d := ch.draCluster()
	d.waitSlice(t, func(devs []resourceapi.Device) bool { return len(devs) == 8 })
	c.ApplyObjects(t, claimTemplate("one-xpu", 1, false))
	const selector = "app.kubernetes.io/name=xpu-dra-driver"
	old := waitDaemonSetPod(t, c, "xpu-system", selector)

	// When each driver pod was first seen running, and first seen
	// deleted: the new one must run before the old one is deleted.
	var mu sync.Mutex
	runningAt, deletedAt := map[types.UID]time.Time{}, map[types.UID]time.Time{}
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			pods, err := c.Client.CoreV1().Pods("xpu-system").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				continue
			}
			now := time.Now()
			mu.Lock()
			for _, p := range pods.Items {
				if _, ok := runningAt[p.UID]; !ok && p.Status.Phase == corev1.PodRunning {
					runningAt[p.UID] = now
				}
				if _, ok := deletedAt[p.UID]; !ok && p.DeletionTimestamp != nil {
					deletedAt[p.UID] = now
				}
			}
			mu.Unlock()
		}
	}()

	const pods = 7
	created := make(chan struct{})
	go func() {
		defer close(created)
		dir := t.TempDir()
		for i := range pods {
			// Not Apply: this goroutine must not end the test.
			path := filepath.Join(dir, fmt.Sprintf("pod-%d.yaml", i))
			data, err := harness.Manifest(xpuPod(fmt.Sprintf("dra-upgrade-%d", i), busybox, "template:one-xpu"))
			if err == nil {
				err = os.WriteFile(path, data, 0o600)
			}
			if err != nil {
				t.Error(err)
				return
			}
			if r := c.Kubectl(t, "apply", "-f", path); !r.Success() {
				t.Errorf("creating pod %d: %s", i, r.String())
			}
			time.Sleep(time.Second)
		}
	}()
	time.Sleep(1500 * time.Millisecond)
	start := time.Now()
	// A changed value in the driver's pod template rolls the DaemonSet.
	ch.rel.run(t, "upgrade", ch.rel.name, filepath.Join(moduleRoot(t), "deployments", "helm", "xpu-cdi"),
		"--namespace", "xpu-system", "--reuse-values", "--set", "dra.healthCheckInterval=700ms", "--wait", "--timeout", "3m")
	t.Logf("helm upgrade --wait: %s", time.Since(start).Round(time.Millisecond))
	<-created

	got := map[int]string{}
	for i := range pods {
		name := fmt.Sprintf("dra-upgrade-%d", i)
		c.WaitPodRunning(t, "default", name, podTimeout)
		idx := d.allocated(t, name)
		require.Len(t, idx, 1, name)
		require.Equal(t, idx, xpusOf(t, c, ch.tree, name), "%s sees exactly the XPU of its allocation", name)
		require.NotContains(t, got, idx[0], "%s and %s share an XPU", name, got[idx[0]])
		got[idx[0]] = name
	}
	close(stop)
	<-watched
	now := waitDaemonSetPod(t, c, "xpu-system", selector)
	require.NotEqual(t, old.UID, now.UID, "the upgrade rolled the driver's pod")
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, runningAt, now.UID)
	require.Contains(t, deletedAt, old.UID, "the old driver pod was deleted")
	require.False(t, runningAt[now.UID].After(deletedAt[old.UID]),
		"the new driver pod ran before the old one was deleted (maxSurge 1): running at %s, old deleted at %s", runningAt[now.UID], deletedAt[old.UID])
	require.Contains(t, c.Logs(t, "xpu-system", now.Name, "xpu-dra-driver"), "rolling updates on, pod "+string(now.UID))

	// The records are the pods' claims, and go with them.
	require.Len(t, d.records(t), pods)
	for i := range pods {
		d.deletePod(t, fmt.Sprintf("dra-upgrade-%d", i))
	}
	d.waitUnprepared(t, "the upgrade's pods deleted")
}
