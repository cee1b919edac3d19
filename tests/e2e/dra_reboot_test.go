package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
)

// TestDRADriverReboot (reliability of the DRA path) takes the node through what a
// reboot does to it, on the private cluster with xpu-dra-driver from
// deployments/ (containerd 2.x): with the kubelet stopped, every pod
// sandbox (the driver's too) is removed, as the containers of a rebooted
// node are gone, and the CDI spec directory (the harness's /var/run/cdi,
// tmpfs on a node) is emptied; the claim records stay, on disk below
// /var/lib/kubelet as the kubelet's checkpoint does. Meanwhile one pod is
// deleted from the API, and its claim with it. The node spec is written
// again before the kubelet starts, as xpu-cdi-refresh does at boot, ordered
// before the engines. Then the pod whose claim still exists starts again
// with the same XPU, the driver pod comes back, and the claim that no
// longer exists leaves no record.
func TestDRADriverReboot(t *testing.T) {
	d := startDRA(t, clusterRuntimes[0].start)
	d.ApplyObjects(t, claimTemplate("keep", 1, false))
	d.ApplyObjects(t, claimTemplate("gone", 1, false))
	d.ApplyObjects(t, xpuPod("dra-keep", d.image, "template:keep"))
	d.ApplyObjects(t, xpuPod("dra-gone", d.image, "template:gone"))
	keep := d.WaitPodRunning(t, "default", "dra-keep", podTimeout)
	d.WaitPodRunning(t, "default", "dra-gone", podTimeout)
	idx := d.allocated(t, "dra-keep")
	require.Len(t, d.records(t), 2)
	gone, err := d.Client.CoreV1().Pods("default").Get(context.Background(), "dra-gone", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, gone.Status.ResourceClaimStatuses[0].ResourceClaimName)
	goneClaim := *gone.Status.ResourceClaimStatuses[0].ResourceClaimName
	oldDriver := d.driverPod(t)

	specs, err := os.ReadDir(d.SpecDir())
	require.NoError(t, err)
	saved := map[string][]byte{}
	for _, e := range specs {
		data, err := os.ReadFile(filepath.Join(d.SpecDir(), e.Name()))
		require.NoError(t, err)
		saved[e.Name()] = data
	}
	require.NotEmpty(t, saved)

	d.RebootKubelet(t, func() {
		// The containers of a rebooted node are gone.
		d.Runtime.MustCrictl(t, "rmp", "--all", "--force")
		require.Empty(t, strings.TrimSpace(d.Runtime.MustCrictl(t, "ps", "--all", "--quiet").Stdout))
		// tmpfs is empty.
		for name := range saved {
			require.NoError(t, os.Remove(filepath.Join(d.SpecDir(), name)))
		}
		// The pod is deleted while the node is down; its claim goes with it.
		zero := int64(0)
		require.NoError(t, d.Client.CoreV1().Pods("default").Delete(context.Background(), "dra-gone", metav1.DeleteOptions{GracePeriodSeconds: &zero}))
		require.Eventually(t, func() bool {
			_, err := d.Client.ResourceV1().ResourceClaims("default").Get(context.Background(), goneClaim, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, podTimeout, 250*time.Millisecond, "claim %s was not deleted with its pod", goneClaim)
		// xpu-cdi-refresh writes the node spec at boot, before the engines.
		for name, data := range saved {
			require.NoError(t, os.WriteFile(filepath.Join(d.SpecDir(), name), data, 0o644))
		}
	})

	// The driver comes back (the same pod, its container created again).
	testutil.Eventually(t, func(t testing.TB) bool {
		p := d.driverPod(t)
		return p.UID == oldDriver.UID && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount > 0 &&
			strings.Contains(d.Logs(t, p.Namespace, p.Name, "xpu-dra-driver"), "publishing 8 XPU(s)")
	}, podTimeout, 500*time.Millisecond, "the driver did not come back")

	pod := d.WaitPodRunning(t, "default", "dra-keep", podTimeout)
	require.NotEqual(t, keep.Status.ContainerStatuses[0].ContainerID, pod.Status.ContainerStatuses[0].ContainerID, "the pod's container was created again")
	require.Equal(t, idx, d.allocated(t, "dra-keep"))
	d.seesExactly(t, "dra-keep", idx...)

	keepClaim := *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
	claim, err := d.Client.ResourceV1().ResourceClaims("default").Get(context.Background(), keepClaim, metav1.GetOptions{})
	require.NoError(t, err)
	testutil.Eventually(t, func(t testing.TB) bool {
		return assert.Equal(t, []string{string(claim.UID) + ".json"}, d.records(t))
	}, podTimeout, 250*time.Millisecond, "the records must be the claim that exists")

	d.deletePod(t, "dra-keep")
	d.waitUnprepared(t, "dra-keep deleted")
}
