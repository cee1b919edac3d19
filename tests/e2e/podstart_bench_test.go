package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// BenchmarkPodStart compares the start of a pod with one XPU through the
// DRA driver (a ResourceClaimTemplate) with the same pod through the
// device plugin (resources.limits baidu.com/xpu: 1), on one private
// cluster (containerd 2.x) and one fake 8-XPU host: from the pod's
// creation to its container running, the pod deleted (and its XPU freed)
// between starts (and, for DRA, its claim unprepared). The DRA driver runs first, then is removed and the device
// plugin deployed. Run by make bench (hack/bench.sh, section podstart).
func BenchmarkPodStart(b *testing.B) {
	harness.RequiresRoot(b)
	d := startDRA(b, clusterRuntimes[0].start)
	// settle runs untimed after each pod's deletion, until the node is
	// ready for the next one.
	measure := func(b *testing.B, pod func(name string) *corev1.Pod, settle func()) {
		durations := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			name := fmt.Sprintf("start-%d", i)
			start := time.Now()
			d.ApplyObjects(b, pod(name))
			d.WaitPodRunning(b, "default", name, podTimeout)
			durations = append(durations, time.Since(start))
			b.StopTimer()
			if os.Getenv("XPU_BENCH_PODSTART_DEBUG") != "" {
				b.Logf("%s started in %s; events:\n%s", name, durations[len(durations)-1],
					d.Kubectl(b, "get", "events", "--namespace", "default", "--sort-by", ".lastTimestamp", "-o",
						"custom-columns=TIME:.lastTimestamp,FIRST:.firstTimestamp,OBJ:.involvedObject.name,REASON:.reason,MSG:.message").Stdout)
			}
			d.deletePod(b, name)
			settle()
			b.StartTimer()
		}
		b.StopTimer()
		slices.Sort(durations)
		ms := func(v time.Duration) float64 { return float64(v) / float64(time.Millisecond) }
		b.ReportMetric(ms(durations[len(durations)/2]), "median-ms")
		b.ReportMetric(ms(durations[(len(durations)*99)/100]), "p99-ms")
	}

	d.ApplyObjects(b, claimTemplate("bench-one", 1, false))
	b.Run("dra", func(b *testing.B) {
		measure(b, func(name string) *corev1.Pod { return xpuPod(name, d.image, "template:bench-one") }, func() {
			// A deleted pod's claim is unprepared by the kubelet after the
			// pod object is gone; until then the driver refuses its XPU to
			// another claim (the old container may still run) and the
			// kubelet retries the next pod's prepare after a backoff of
			// about 5 s. The comparison is of starts on a quiet node.
			testutil.Eventually(b, func(t testing.TB) bool { return assert.Empty(t, d.records(t), "claim records left") }, podTimeout, 50*time.Millisecond)
		})
	})

	// One of the two per node: the DRA driver goes, the device plugin comes.
	ctx := context.Background()
	zero := int64(0)
	require.NoError(b, d.Client.AppsV1().DaemonSets(d.ds.Namespace).Delete(ctx, d.ds.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	d.MustKubectl(b, "delete", "deviceclass", "--all")
	deployDevicePlugin(b, d)
	b.Run("device-plugin", func(b *testing.B) {
		measure(b, func(name string) *corev1.Pod { return limitsPod(name, d.image, "baidu.com/xpu") }, func() {})
	})
}

// deployDevicePlugin runs deployments/xpu-device-plugin.yaml on d's node
// with the test's image, host paths and vendor (as TestKubeletDaemonSet
// does) and waits until the node advertises the 8 XPUs.
func deployDevicePlugin(b testing.TB, d *draCluster) {
	data, err := os.ReadFile(filepath.Join(moduleRoot(b), "deployments", "xpu-device-plugin.yaml"))
	require.NoError(b, err)
	var ds appsv1.DaemonSet
	require.NoError(b, yaml.UnmarshalStrict(data, &ds))
	spec := &ds.Spec.Template.Spec
	spec.HostNetwork = true
	ctr := &spec.Containers[0]
	ctr.Image = d.ds.Spec.Template.Spec.Containers[0].Image // the same image holds both binaries
	ctr.ImagePullPolicy = corev1.PullNever
	ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "XPU_CDI_VENDOR", Value: d.vendor})
	hostPaths := map[string]string{
		"/dev": d.tree.Path("/dev"), "/proc": d.tree.Path("/proc"), "/sys": d.tree.Path("/sys"),
		"/etc/cdi": d.SpecDir(), "/var/run/cdi": b.TempDir(),
	}
	for i := range spec.Volumes {
		if hp := spec.Volumes[i].HostPath; hp != nil {
			if p, ok := hostPaths[hp.Path]; ok {
				hp.Path = p
			}
		}
	}
	_, err = d.Client.AppsV1().DaemonSets(ds.Namespace).Create(context.Background(), &ds, metav1.CreateOptions{})
	require.NoError(b, err)
	require.Eventually(b, func() bool {
		n, err := d.Client.CoreV1().Nodes().Get(context.Background(), d.Node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		q := n.Status.Allocatable["baidu.com/xpu"]
		return q.Cmp(resource.MustParse("8")) == 0
	}, podTimeout, 250*time.Millisecond, "the node does not advertise 8 baidu.com/xpu")
}
