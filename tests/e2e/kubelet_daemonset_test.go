package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestKubeletDaemonSetPod runs the pod of deployments/xpu-device-plugin.yaml
// as a static pod of a real kubelet (standalone: no API server, so no
// DaemonSet controller) with the image's binaries, and a pod asking for one
// XPU next to it. What the test changes in the pod template: the image (the
// static binaries imported into containerd), the host paths of /dev, /proc
// and /sys (the fake host's), the spec directories (the test containerd's),
// the CDI vendor (a test vendor) and host networking (this host has no CNI).
// The rest (command, variables, mounts, security context with every
// capability dropped and a read-only root, node selector through the
// kubelet's --node-labels) is the manifest's.
func TestKubeletDaemonSetPod(t *testing.T) {
	harness.RequiresRoot(t)
	harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "kubelet"))
	harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "crictl"))
	tree := FakeHost(t, fakehost.P800x8())
	c := harness.NewContainerd(t)
	vendor := harness.UniqueVendor(t)
	c.WriteSpec(t, GenerateSpec(t, tree, vendor), vendor)
	image := importCRIImages(t, c)

	// The image: the static binaries in /usr/bin, nothing else (as make image).
	rootfs := t.TempDir()
	for _, name := range []string{"xpu-cdi", "xpu-runtime-hook", "xpu-container-runtime", "xpu-device-plugin"} {
		data, err := os.ReadFile(Binary(t, name))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "usr", "bin"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(rootfs, "usr", "bin", name), data, 0o755))
	}
	pluginImage := c.ImportImage(t, rootfs, "xpu-cdi-e2e-plugin", harness.WithImageNamespace(harness.CRINamespace),
		harness.WithImageCmd("/usr/bin/xpu-device-plugin"))

	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "deployments", "xpu-device-plugin.yaml"))
	require.NoError(t, err)
	var ds appsv1.DaemonSet
	require.NoError(t, yaml.UnmarshalStrict(data, &ds))
	pod := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels},
		Spec:       ds.Spec.Template.Spec,
	}
	pod.Spec.HostNetwork = true
	ctr := &pod.Spec.Containers[0]
	ctr.Image, ctr.ImagePullPolicy = pluginImage, corev1.PullNever
	ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "XPU_CDI_VENDOR", Value: vendor})
	hostPaths := map[string]string{
		"/dev": tree.Path("/dev"), "/proc": tree.Path("/proc"), "/sys": tree.Path("/sys"),
		"/etc/cdi": c.SpecDir(), "/var/run/cdi": t.TempDir(),
	}
	for i := range pod.Spec.Volumes {
		if hp := pod.Spec.Volumes[i].HostPath; hp != nil {
			if p, ok := hostPaths[hp.Path]; ok {
				hp.Path = p
			}
		}
	}
	manifest, err := yaml.Marshal(pod)
	require.NoError(t, err)

	claimPluginDir(t)
	var labels []string
	for k, v := range pod.Spec.NodeSelector {
		if k != "kubernetes.io/os" { // the kubelet sets it itself
			labels = append(labels, k+"="+v)
		}
	}
	k := startKubelet(t, c, "--node-labels", strings.Join(labels, ","))
	require.NoError(t, os.WriteFile(filepath.Join(k.manifests, "xpu-device-plugin.yaml"), manifest, 0o644))

	var pluginID string
	require.Eventually(t, func() bool {
		r := c.Crictl(t, "ps", "--quiet", "--state", "Running", "--name", "^xpu-device-plugin$")
		pluginID = strings.TrimSpace(r.Stdout)
		if !r.Success() || pluginID == "" {
			return false
		}
		logs := c.Crictl(t, "logs", pluginID)
		return strings.Contains(logs.Stdout+logs.Stderr, "registered baidu.com/xpu with the kubelet")
	}, 90*time.Second, 500*time.Millisecond, "the DaemonSet's pod did not start and register")
	logs := c.MustCrictl(t, "logs", pluginID)
	require.Contains(t, logs.Stdout+logs.Stderr, "advertising 8 baidu.com/xpu device(s), 8 healthy")

	k.staticPod(t, "xpu-one", image, 1)
	id := runningContainer(t, c, "xpu-one")
	cdi := cdiDevicesOf(t, c, id)
	require.Len(t, cdi, 1)
	nodes, env := parseNodes(t, c.MustCrictl(t, "exec", id, "sh", "-c", listXPUs).Stdout)
	wantNodes, wantEnv := expect(tree, indexOf(t, cdi[0]))
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantEnv, env)
}
