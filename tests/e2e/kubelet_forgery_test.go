package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// forgeryPod is a static pod that asks for no XPU and mounts a hostPath
// (the link) read-only at /var/run/xpu-container-devices/all, what a pod
// author writes to forge the device plugin's volume-mounts grant.
func (k *testKubelet) forgeryPod(t *testing.T, name, image, link string) {
	t.Helper()
	k.writeStaticPod(t, testPod(name, image, asStaticPod, func(p *corev1.Pod) {
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{
			Name: "grant", MountPath: "/var/run/xpu-container-devices/all", ReadOnly: true,
		}}
		p.Spec.Volumes = []corev1.Volume{{
			Name:         "grant",
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: link}},
		}}
	}))
}

// TestKubeletHostPathForgery (docs/security.md, "A hostPath symlink to
// /dev/null at /var/run/xpu-container-devices/all") runs the kubelet
// standalone against containerd 2.x whose default runtime is the shim (jit
// mode), with the real xpu-device-plugin answering volume-mounts. A pod
// that asks for no XPU but mounts a hostPath that is a symlink to /dev/null
// at /var/run/xpu-container-devices/all (containerd resolves the link, so
// the OCI spec holds what the plugin's answer holds) is refused under the
// shim's default configuration, and so is the plugin's own answer: nothing
// tells them apart. With accept-device-plugin-mounts = true, the setting of
// a node where no pod may use hostPath, the plugin's answer gives exactly
// the allocated XPU, and the forgery every XPU: what every pod got before
// the key existed, and why docs/security.md keeps volume-mounts out of
// clusters whose pods may use hostPath.
func TestKubeletHostPathForgery(t *testing.T) {
	harness.RequiresRoot(t)
	harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "kubelet"))
	harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "crictl"))
	tree := FakeHost(t, fakehost.P800x8())
	vendor := harness.UniqueVendor(t)
	shim, shimLog := shimRuntime(t, tree, fmt.Sprintf("vendor = %q\naccept-device-plugin-mounts = false\n", vendor))
	shimConfig := filepath.Join(filepath.Dir(shim), "config.toml")
	c := harness.NewContainerd(t, harness.WithConfigEdit(func(t testing.TB, path string) {
		configureRuntime(t, "--runtime", "containerd", "--config", path,
			"--drop-in-file", filepath.Join(filepath.Dir(path), "conf.d", "99-xpu.toml"), "--runtime-path", shim, "--set-as-default")
	}))
	image := importCRIImages(t, c)
	dir := claimKubelet(t)
	plugin := startDevicePlugin(t, tree, harness.DevicePluginDir, "--vendor", vendor, "--device-list-strategy", "volume-mounts",
		"--cdi-spec-dir", t.TempDir())
	k := startKubelet(t, dir, c)
	require.Eventually(t, func() bool { return strings.Contains(plugin.log.String(), "registered baidu.com/xpu with the kubelet") },
		60*time.Second, 100*time.Millisecond, "the plugin did not register:\n%s", plugin.log.String())
	require.Contains(t, plugin.log.String(), "a pod with a hostPath volume (even one a policy limits to a prefix, through a symlink)")

	// A directory a prefix-limited hostPath policy would allow, holding
	// the pod author's link.
	link := filepath.Join(t.TempDir(), "scratch", "data")
	require.NoError(t, os.MkdirAll(filepath.Dir(link), 0o755))
	require.NoError(t, os.Symlink("/dev/null", link))

	// refused waits until the shim refused the mounts of the pod's
	// container, names the start of what they asked for; the container
	// never runs.
	refused := func(t *testing.T, name, names string, from int64) {
		t.Helper()
		want := "the container asks for XPUs through mounts at /var/run/xpu-container-devices/ (" + names
		require.Eventually(t, func() bool {
			data, err := os.ReadFile(shimLog)
			return err == nil && int64(len(data)) > from && strings.Contains(string(data[from:]), want)
		}, 90*time.Second, 250*time.Millisecond, "the shim did not refuse the mounts of %s", name)
		r := c.Crictl(t, "ps", "--quiet", "--state", "Running", "--name", "^main$", "--label", "io.kubernetes.pod.name="+name+"-"+kubeletNode)
		require.Empty(t, strings.TrimSpace(r.Stdout), "a container of %s runs", name)
		if p, err := k.pod(name); err == nil && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Waiting != nil {
			t.Logf("%s: %s: %s", name, p.Status.ContainerStatuses[0].State.Waiting.Reason, p.Status.ContainerStatuses[0].State.Waiting.Message)
		}
		require.NoError(t, os.Remove(filepath.Join(k.manifests, name+".yaml")))
	}

	t.Run("default: the forgery gives nothing", func(t *testing.T) {
		from := fileSize(t, shimLog)
		k.forgeryPod(t, "xpu-forged", image, link)
		refused(t, "xpu-forged", vendor+"/xpu=all)", from)
	})
	t.Run("default: the plugin's answer is refused too, naming the key", func(t *testing.T) {
		from := fileSize(t, shimLog)
		k.staticPod(t, "xpu-granted", image, 1)
		refused(t, "xpu-granted", vendor+"/xpu=", from)
		data, err := os.ReadFile(shimLog)
		require.NoError(t, err)
		require.Contains(t, string(data), "set accept-device-plugin-mounts = true in "+shimConfig)
	})

	cfg, err := os.ReadFile(shimConfig)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(shimConfig, []byte(strings.Replace(string(cfg),
		"accept-device-plugin-mounts = false", "accept-device-plugin-mounts = true", 1)), 0o644))

	t.Run("accepted: the plugin's answer gives exactly its XPU", func(t *testing.T) {
		k.staticPod(t, "xpu-accepted", image, 1)
		id := runningContainer(t, c, "xpu-accepted")
		nodes, _ := parseNodes(t, c.MustCrictl(t, "exec", id, "sh", "-c", listXPUs).Stdout)
		require.Len(t, nodes, 2, "one XPU and /dev/xpuctrl: %v", nodes)
	})
	t.Run("accepted: the forgery gives every XPU", func(t *testing.T) {
		k.forgeryPod(t, "xpu-forged-accepted", image, link)
		id := runningContainer(t, c, "xpu-forged-accepted")
		nodes, _ := parseNodes(t, c.MustCrictl(t, "exec", id, "sh", "-c", listXPUs).Stdout)
		all := make([]int, 0, 8)
		for i := range 8 {
			all = append(all, i)
		}
		wantNodes, _ := expect(tree, all...)
		require.Equal(t, wantNodes, nodes, "the documented limit of volume-mounts")
	})
}
