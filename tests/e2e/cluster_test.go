package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// clusterRuntimes are the CRI engines a cluster test runs on.
var clusterRuntimes = []struct {
	name  string
	start func(t testing.TB) harness.CRI
}{
	{"containerd2", func(t testing.TB) harness.CRI { return harness.NewContainerd(t) }},
	{"crio", func(t testing.TB) harness.CRI { return harness.NewCRIO(t) }},
}

// podTimeout bounds how long a test waits for a pod on the test cluster.
const podTimeout = 2 * time.Minute

// TestClusterSmoke starts the private cluster (etcd, API server, controller
// manager, scheduler, kubelet) on each CRI engine: the node is Ready, a
// plain pod is scheduled and runs (its logs and exec go through the API
// server and the kubelet), the DaemonSet controller runs a DaemonSet's pod on
// the node, and a kubelet restart leaves the running pod alone.
func TestClusterSmoke(t *testing.T) {
	harness.RequiresRoot(t)
	for _, rt := range clusterRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			c := harness.NewCluster(t, harness.WithClusterRuntime(rt.start))
			ctx := testCtx(t)
			node, err := c.Client.CoreV1().Nodes().Get(ctx, c.Node, metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, harness.KubernetesVersion, node.Status.NodeInfo.KubeletVersion)
			version := c.MustKubectl(t, "version", "--output", "json").Stdout
			require.Contains(t, version, `"gitVersion": "`+harness.KubernetesVersion+`"`, "kubectl and the API server are stamped with the version")

			image := c.BusyboxImage(t)
			c.ApplyObjects(t, sleeperPod("plain", image))
			pod := c.WaitPodRunning(t, "default", "plain", podTimeout)
			require.Equal(t, c.Node, pod.Spec.NodeName, "the scheduler bound the pod")
			testutil.Eventually(t, func(t testing.TB) bool {
				return strings.Contains(c.Logs(t, "default", "plain", "main"), "hello from plain")
			}, 30*time.Second, 250*time.Millisecond)
			r := c.Exec(t, "default", "plain", "main", "sh", "-c", "echo exec-ok")
			require.True(t, r.Success(), r.String())
			require.Equal(t, "exec-ok", strings.TrimSpace(r.Stdout))

			labels := map[string]string{"app": "smoke"}
			c.ApplyObjects(t, &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
				Spec: appsv1.DaemonSetSpec{
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec:       testPod("", image).Spec,
					},
				},
			})
			dsPod := waitDaemonSetPod(t, c, "default", "app=smoke")
			require.Equal(t, c.Node, dsPod.Spec.NodeName)

			before := pod.Status.ContainerStatuses[0].ContainerID
			c.RestartKubelet(t)
			pod = c.WaitPodRunning(t, "default", "plain", podTimeout)
			require.Equal(t, before, pod.Status.ContainerStatuses[0].ContainerID, "the container survived the kubelet restart")
			require.Zero(t, pod.Status.ContainerStatuses[0].RestartCount)
		})
	}
}

// waitDaemonSetPod waits for the one pod of a DaemonSet (selected by label)
// to run and returns it.
func waitDaemonSetPod(t testing.TB, c *harness.Cluster, namespace, selector string) *corev1.Pod {
	t.Helper()
	var name string
	require.Eventually(t, func() bool {
		pods, err := c.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(pods.Items) != 1 {
			return false
		}
		name = pods.Items[0].Name
		return true
	}, podTimeout, 250*time.Millisecond, "the DaemonSet controller made no pod for %s", selector)
	return c.WaitPodRunning(t, namespace, name, podTimeout)
}
