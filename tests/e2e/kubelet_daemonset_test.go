package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestKubeletDaemonSet applies the DaemonSet of
// deployments/xpu-device-plugin.yaml to the private cluster (on containerd
// 2.x and CRI-O) with the image's binaries: the DaemonSet controller puts its
// pod on the labelled node, the plugin registers with the kubelet, the node
// advertises the 8 XPUs of the fake host, and a pod asking for one XPU is
// scheduled and runs with exactly one of them. What the test changes in the
// DaemonSet: the image (the static binaries imported into the runtime), the
// host paths of /dev, /proc and /sys (the fake host's), the spec directories
// (the runtime's), the CDI vendor (a test vendor) and host networking (the
// test cluster has no CNI network). The rest (command, variables, mounts,
// security context with every capability dropped and a read-only root,
// priority class, node selector) is the manifest's.
func TestKubeletDaemonSet(t *testing.T) {
	harness.RequiresRoot(t)
	for _, rt := range clusterRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			tree := FakeHost(t, fakehost.P800x8())
			data, err := os.ReadFile(filepath.Join(moduleRoot(t), "deployments", "xpu-device-plugin.yaml"))
			require.NoError(t, err)
			var ds appsv1.DaemonSet
			require.NoError(t, yaml.UnmarshalStrict(data, &ds))
			var labels []string
			for k, v := range ds.Spec.Template.Spec.NodeSelector {
				if k != "kubernetes.io/os" { // the kubelet sets it itself
					labels = append(labels, k+"="+v)
				}
			}
			// The label of the first node affinity term (the terms are ORed).
			if a := ds.Spec.Template.Spec.Affinity; a != nil && a.NodeAffinity != nil {
				e := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
				labels = append(labels, e.Key+"="+e.Values[0])
			}

			c := harness.NewCluster(t, harness.WithClusterRuntime(rt.start), harness.WithNodeLabels(labels...))
			vendor := harness.UniqueVendor(t)
			c.Runtime.WriteSpec(t, GenerateSpec(t, tree, vendor), vendor)
			image := c.BusyboxImage(t)

			// The image: the static binaries in /usr/bin, nothing else (as make image).
			rootfs := t.TempDir()
			for _, name := range []string{"xpu-cdi", "xpu-runtime-hook", "xpu-container-runtime", "xpu-device-plugin"} {
				data, err := os.ReadFile(Binary(t, name))
				require.NoError(t, err)
				require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "usr", "bin"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(rootfs, "usr", "bin", name), data, 0o755))
			}
			pluginImage := c.ImportImage(t, rootfs, "xpu-cdi-e2e-plugin", harness.WithImageCmd("/usr/bin/xpu-device-plugin"))

			spec := &ds.Spec.Template.Spec
			spec.HostNetwork = true
			ctr := &spec.Containers[0]
			ctr.Image, ctr.ImagePullPolicy = pluginImage, corev1.PullNever
			setEnv(ctr, corev1.EnvVar{Name: "XPU_CDI_VENDOR", Value: vendor})
			hostPaths := map[string]string{
				"/dev": tree.Path("/dev"), "/proc": tree.Path("/proc"), "/sys": tree.Path("/sys"),
				"/etc/cdi": c.SpecDir(), "/var/run/cdi": t.TempDir(),
			}
			for i := range spec.Volumes {
				if hp := spec.Volumes[i].HostPath; hp != nil {
					if p, ok := hostPaths[hp.Path]; ok {
						hp.Path = p
					}
				}
			}
			ctx := testCtx(t)
			_, err = c.Client.AppsV1().DaemonSets(ds.Namespace).Create(ctx, &ds, metav1.CreateOptions{})
			require.NoError(t, err)

			pod := waitDaemonSetPod(t, c, ds.Namespace, "app.kubernetes.io/name=xpu-device-plugin")
			testutil.Eventually(t, func(t testing.TB) bool {
				return strings.Contains(c.Logs(t, ds.Namespace, pod.Name, "xpu-device-plugin"), "registered baidu.com/xpu with the kubelet")
			}, podTimeout, 500*time.Millisecond, "the DaemonSet's pod did not register")
			require.Contains(t, c.Logs(t, ds.Namespace, pod.Name, "xpu-device-plugin"), "advertising 8 baidu.com/xpu device(s), 8 healthy")
			require.Eventually(t, func() bool {
				n, err := c.Client.CoreV1().Nodes().Get(context.Background(), c.Node, metav1.GetOptions{})
				if err != nil {
					return false
				}
				q := n.Status.Allocatable["baidu.com/xpu"]
				return q.Cmp(resource.MustParse("8")) == 0
			}, podTimeout, 250*time.Millisecond, "the node does not advertise 8 baidu.com/xpu")

			c.Apply(t, example(t, "device-plugin-pod.yaml", image))
			c.WaitPodRunning(t, "default", "xpu-one", podTimeout)
			r := c.Exec(t, "default", "xpu-one", "main", "sh", "-c", listXPUs)
			require.True(t, r.Success(), r.String())
			nodes, env := parseNodes(t, r.Stdout)
			var idx []int
			for _, d := range tree.Devices {
				if _, ok := nodes[d.Path]; ok {
					idx = append(idx, d.Index)
				}
			}
			require.Len(t, idx, 1, "exactly one XPU in the pod: %v", nodes)
			wantNodes, wantEnv := expect(tree, idx[0])
			require.Equal(t, wantNodes, nodes)
			require.Equal(t, wantEnv, env)
			require.Contains(t, c.Logs(t, ds.Namespace, pod.Name, "xpu-device-plugin"), "allocated baidu.com/xpu")
		})
	}
}
