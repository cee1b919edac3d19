package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestDRAChurn is the cluster part of the churn test (the 500-claim churn
// runs at the gRPC level: internal/dra TestChurn): rounds of 8 pods, each
// with a claim of one XPU from a template, started at once on the 8-XPU
// host and deleted; the driver's pod is deleted (the DaemonSet brings it
// back) after the first round and the kubelet restarted after the second.
// After every round no claim record is left, and every pod of the next
// round runs with its own XPU: none is refused for a claim that is gone.
// The driver's pod is ready (its readiness probe) after each restart.
func TestDRAChurn(t *testing.T) {
	harness.RequiresRoot(t)
	d := startDRA(t, clusterRuntimes[0].start)
	d.waitSlice(t, func(devs []resourceapi.Device) bool { return len(devs) == 8 })
	d.ApplyObjects(t, claimTemplate("churn", 1, false))
	const rounds = 4
	for round := range rounds {
		names := make([]string, 8)
		for i := range names {
			names[i] = fmt.Sprintf("churn-%d-%d", round, i)
			d.ApplyObjects(t, xpuPod(names[i], d.image, "template:churn"))
		}
		seen := map[int]string{}
		for _, n := range names {
			d.WaitPodRunning(t, "default", n, podTimeout)
			idx := d.allocated(t, n)
			require.Len(t, idx, 1)
			require.Empty(t, seen[idx[0]], "round %d: XPU %d twice", round, idx[0])
			seen[idx[0]] = n
		}
		require.Len(t, d.records(t), 8, "round %d", round)
		for _, n := range names {
			d.deletePod(t, n)
		}
		d.waitUnprepared(t, "round %d", round)
		switch round {
		case 0:
			old := d.driverPod(t)
			require.NoError(t, d.Client.CoreV1().Pods(old.Namespace).Delete(context.Background(), old.Name, metav1.DeleteOptions{}))
			testutil.Eventually(t, func(t testing.TB) bool { return d.driverPod(t).Name != old.Name }, podTimeout, 500*time.Millisecond, "the DaemonSet did not bring the driver back")
		case 1:
			d.RestartKubelet(t)
		}
		if round < 2 {
			d.WaitPod(t, d.ds.Namespace, d.driverPod(t).Name, podTimeout, func(p *corev1.Pod) bool {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
						return true
					}
				}
				return false
			})
		}
	}
}
