package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/xpu-cdi/xpu-cdi/internal/deviceplugin/kubelettest"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// syncBuffer collects a process's output while it runs.
type syncBuffer struct {
	mu sync.Mutex
	sb strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.String()
}

// devicePlugin is a running xpu-device-plugin binary.
type devicePlugin struct {
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan error
}

// startDevicePlugin runs the real plugin binary on a fake host against the
// kubelet directory dir.
func startDevicePlugin(t *testing.T, tree *fakehost.Tree, dir string, args ...string) *devicePlugin {
	t.Helper()
	all := append([]string{
		"--dev-root", tree.Root, "--driver-root", tree.Root,
		"--device-plugin-path", dir, "--health-check-interval", "200ms", "--log-level", "debug",
	}, args...)
	cmd := exec.Command(Binary(t, "xpu-device-plugin"), all...)
	p := &devicePlugin{cmd: cmd, log: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout = p.log
	cmd.Stderr = p.log
	require.NoError(t, cmd.Start())
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		p.done <- nil
		if t.Failed() {
			t.Logf("xpu-device-plugin log:\n%s", p.log.String())
		}
	})
	return p
}

// stop sends SIGTERM and returns the exit error.
func (p *devicePlugin) stop(t *testing.T) error {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("xpu-device-plugin did not stop 10 s after SIGTERM:\n%s", p.log.String())
		return nil
	}
}

// kubeletDir is a short temporary kubelet device plugin directory (unix
// socket paths are limited to 108 bytes).
func kubeletDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "xe2e-kubelet-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// criPod writes the pod and container configs of a CRI container that runs
// sleep with the Allocate answer applied as the kubelet applies it (CDI
// devices, annotations, environment) and returns their paths.
func criPod(t *testing.T, name, image string, resp *pluginapi.ContainerAllocateResponse) (podPath, ctrPath string) {
	t.Helper()
	dir := t.TempDir()
	pod := map[string]any{
		"metadata": map[string]any{"name": name, "namespace": "default", "uid": name + "-uid", "attempt": 0},
		// Host network: the harness's CRI has no CNI plugins.
		"linux": map[string]any{"security_context": map[string]any{"namespace_options": map[string]any{"network": 2}}},
	}
	var cdi []map[string]string
	for _, d := range resp.GetCdiDevices() {
		cdi = append(cdi, map[string]string{"name": d.GetName()})
	}
	var envs []map[string]string
	for k, v := range resp.GetEnvs() {
		envs = append(envs, map[string]string{"key": k, "value": v})
	}
	ctr := map[string]any{
		"metadata":    map[string]any{"name": name},
		"image":       map[string]any{"image": image},
		"command":     []string{"sleep", "2147483647"},
		"CDI_devices": cdi,
		"annotations": resp.GetAnnotations(),
		"envs":        envs,
	}
	podPath, ctrPath = filepath.Join(dir, "pod.json"), filepath.Join(dir, "container.json")
	for path, v := range map[string]any{podPath: pod, ctrPath: ctr} {
		data, err := json.Marshal(v)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, data, 0o644))
	}
	return podPath, ctrPath
}

// importCRIImages imports the sandbox and test images into the CRI namespace.
func importCRIImages(t *testing.T, c *harness.Containerd) string {
	t.Helper()
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	c.ImportImage(t, rootfs, harness.CRISandboxImage,
		harness.WithImageNamespace(harness.CRINamespace), harness.WithImageCmd("sleep", "2147483647"))
	return c.ImportImage(t, rootfs, "xpu-e2e-busybox", harness.WithImageNamespace(harness.CRINamespace),
		harness.WithImageCmd("sleep", "2147483647"))
}

func allocate(ctx context.Context, reg *kubelettest.Plugin, ids ...string) (*pluginapi.ContainerAllocateResponse, error) {
	resp, err := reg.Client.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}},
	})
	if err != nil {
		return nil, err
	}
	return resp.ContainerResponses[0], nil
}

// TestDevicePluginContainerd2CRI registers the real xpu-device-plugin with a
// test kubelet side (the real Registration API on a temporary kubelet.sock),
// takes its Allocate answer (cdi-cri: CDI names) into a real CRI container on
// containerd 2.x, which resolves them from the spec xpu-cdi wrote: the
// container sees exactly the allocated XPUs. CRI-O is covered by the CRI-O
// tests where they exist.
func TestDevicePluginContainerd2CRI(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "crictl"))
	c := harness.NewContainerd(t)
	vendor := harness.UniqueVendor(t)
	c.WriteSpec(t, GenerateSpec(t, tree, vendor), vendor)
	image := importCRIImages(t, c)
	ctx := testCtx(t)

	dir := kubeletDir(t)
	k, err := kubelettest.Start(dir)
	require.NoError(t, err)
	t.Cleanup(k.Stop)
	plugin := startDevicePlugin(t, tree, dir, "--vendor", vendor, "--cdi-spec-dir", c.SpecDir())

	reg, err := k.WaitRegistration(ctx)
	require.NoError(t, err, plugin.log.String())
	require.Equal(t, "baidu.com/xpu", reg.Request.ResourceName)
	devs, err := reg.NextDevices(ctx)
	require.NoError(t, err)
	require.Len(t, devs, 8)
	for _, d := range devs {
		require.Equal(t, pluginapi.Healthy, d.Health, "device %s:\n%s", d.ID, plugin.log.String())
	}

	// What the kubelet asks before it allocates two devices: one NUMA node.
	pref, err := reg.Client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: []string{"1", "2", "5", "6", "7"}, AllocationSize: 2,
		}},
	})
	require.NoError(t, err)
	require.Equal(t, []string{"1", "2"}, pref.ContainerResponses[0].DeviceIDs)

	t.Run("allocated XPUs and only those", func(t *testing.T) {
		resp, err := allocate(ctx, reg, "2", "5")
		require.NoError(t, err)
		require.Len(t, resp.CdiDevices, 2)
		require.Equal(t, vendor+"/xpu=2", resp.CdiDevices[0].Name)
		require.Equal(t, vendor+"/xpu=5", resp.CdiDevices[1].Name)

		pod, ctr := criPod(t, "xpu-dp-cri", image, resp)
		id := strings.TrimSpace(c.MustCrictl(t, "run", ctr, pod).Stdout)
		r := c.MustCrictl(t, "exec", id, "sh", "-c", listXPUs)
		nodes, env := parseNodes(t, r.Stdout)
		wantNodes, wantEnv := expect(tree, 2, 5)
		require.Equal(t, wantNodes, nodes)
		require.Equal(t, wantEnv, env)
		// The CRI keeps the CDI request with the container.
		require.Contains(t, c.MustCrictl(t, "inspect", id).Stdout, vendor+"/xpu=5")
	})

	t.Run("device in error state", func(t *testing.T) {
		state := tree.Path("/proc/xpu/dev5/state")
		require.NoError(t, os.WriteFile(state, []byte("ERROR\n"), 0o666))
		t.Cleanup(func() { _ = os.WriteFile(state, []byte("RUNNING\n"), 0o666) })
		devs, err := reg.WaitDevices(ctx, func(d []*pluginapi.Device) bool {
			for _, x := range d {
				if x.ID == "5" {
					return x.Health == pluginapi.Unhealthy
				}
			}
			return false
		})
		require.NoError(t, err)
		require.Len(t, devs, 8)
		_, err = allocate(ctx, reg, "5")
		require.ErrorContains(t, err, `baidu.com/xpu device "5" is Unhealthy: the driver reports state ERROR`)
		_, err = allocate(ctx, reg, "8")
		require.ErrorContains(t, err, `baidu.com/xpu device "8" is not a device of this node`)
	})

	t.Run("kubelet restart and SIGTERM", func(t *testing.T) {
		require.NoError(t, k.Restart())
		reg, err := k.WaitRegistration(ctx)
		require.NoError(t, err, plugin.log.String())
		_, err = reg.NextDevices(ctx)
		require.NoError(t, err)
		sock := filepath.Join(dir, "xpu-baidu.com_xpu.sock")
		require.FileExists(t, sock)

		require.NoError(t, plugin.stop(t), plugin.log.String())
		require.NoFileExists(t, sock, "the socket is removed on SIGTERM")
		require.Contains(t, plugin.log.String(), "registering again")
	})
}

// TestDevicePluginWaitsForKubeletAndNoXPU: started before the kubelet on a
// node without XPU, the plugin stays up, registers when the kubelet comes
// and advertises zero devices, saying why.
func TestDevicePluginWaitsForKubeletAndNoXPU(t *testing.T) {
	h := fakehost.P800x8()
	h.NoNodes = true
	harness.RequiresRoot(t)
	tree := fakehosttest.Build(t, h) // no node at all: nothing to mknod
	dir := kubeletDir(t)
	plugin := startDevicePlugin(t, tree, dir, "--cdi-spec-dir", t.TempDir())
	require.Eventually(t, func() bool { return strings.Contains(plugin.log.String(), "waiting for the kubelet") }, 30*time.Second, 50*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-plugin.done:
		plugin.done <- err
		t.Fatalf("the plugin exited: %v\n%s", err, plugin.log.String())
	default:
	}

	k, err := kubelettest.Start(dir)
	require.NoError(t, err)
	t.Cleanup(k.Stop)
	ctx := testCtx(t)
	reg, err := k.WaitRegistration(ctx)
	require.NoError(t, err, plugin.log.String())
	devs, err := reg.NextDevices(ctx)
	require.NoError(t, err)
	require.Empty(t, devs)
	require.Contains(t, plugin.log.String(), "advertising no baidu.com/xpu: no Kunlun XPU found under "+tree.Root)
	require.NoError(t, plugin.stop(t))
}

// TestDevicePluginContainerd2Annotations: the plugin's cdi-annotations
// answer becomes a CRI container annotation (cdi.k8s.io/...), which
// containerd 2.x resolves itself (its CRI always handles CDI, annotations
// included): the container sees exactly the allocated XPUs. The same
// annotation through xpu-container-runtime is TestShimContainerd16's (a CRI
// that knows CDI never lets the annotation reach a runtime unresolved).
func TestDevicePluginContainerd2Annotations(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "crictl"))
	c := harness.NewContainerd(t)
	vendor := harness.UniqueVendor(t)
	c.WriteSpec(t, GenerateSpec(t, tree, vendor), vendor)
	image := importCRIImages(t, c)
	ctx := testCtx(t)

	dir := kubeletDir(t)
	k, err := kubelettest.Start(dir)
	require.NoError(t, err)
	t.Cleanup(k.Stop)
	plugin := startDevicePlugin(t, tree, dir, "--vendor", vendor, "--device-list-strategy", "cdi-annotations", "--cdi-spec-dir", c.SpecDir())
	reg, err := k.WaitRegistration(ctx)
	require.NoError(t, err, plugin.log.String())
	_, err = reg.WaitDevices(ctx, func(d []*pluginapi.Device) bool { return len(d) == 8 && d[3].Health == pluginapi.Healthy })
	require.NoError(t, err, plugin.log.String())

	resp, err := allocate(ctx, reg, "3", "6")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"cdi.k8s.io/xpu-device-plugin_xpu": vendor + "/xpu=3," + vendor + "/xpu=6"}, resp.Annotations)
	require.Empty(t, resp.CdiDevices)

	pod, ctr := criPod(t, "xpu-dp-annotations", image, resp)
	id := strings.TrimSpace(c.MustCrictl(t, "run", ctr, pod).Stdout)
	r := c.MustCrictl(t, "exec", id, "sh", "-c", listXPUs)
	nodes, env := parseNodes(t, r.Stdout)
	wantNodes, wantEnv := expect(tree, 3, 6)
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantEnv, env)
}

// TestDevicePluginContainerd2ShimEnvvar: the plugin's envvar answer
// (XPU_VISIBLE_DEVICES) as a CRI container variable on containerd 2.x with
// xpu-container-runtime as the runtime handler and
// accept-envvar-when-unprivileged = true: the shim gives the container
// exactly the allocated XPUs (containerd does not touch the variable, so the
// shim is what resolves it).
func TestDevicePluginContainerd2ShimEnvvar(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "crictl"))
	shim, _ := shimRuntime(t, tree, "accept-envvar-when-unprivileged = true\n")
	c := harness.NewContainerd(t, harness.WithContainerdConfig(`[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.xpu]
  runtime_type = "io.containerd.runc.v2"
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.xpu.options]
    BinaryName = "`+shim+`"`))
	image := importCRIImages(t, c)
	ctx := testCtx(t)

	dir := kubeletDir(t)
	k, err := kubelettest.Start(dir)
	require.NoError(t, err)
	t.Cleanup(k.Stop)
	// No spec check for envvar: the shim in jit mode needs none.
	plugin := startDevicePlugin(t, tree, dir, "--device-list-strategy", "envvar", "--cdi-spec-dir", t.TempDir())
	reg, err := k.WaitRegistration(ctx)
	require.NoError(t, err, plugin.log.String())
	devs, err := reg.NextDevices(ctx)
	require.NoError(t, err)
	require.Len(t, devs, 8)
	require.Equal(t, pluginapi.Healthy, devs[7].Health, plugin.log.String())

	resp, err := allocate(ctx, reg, "0", "7")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"XPU_VISIBLE_DEVICES": "0,7"}, resp.Envs)

	pod, ctr := criPod(t, "xpu-dp-envvar", image, resp)
	id := strings.TrimSpace(c.MustCrictl(t, "run", "--runtime", "xpu", ctr, pod).Stdout)
	nodes, _ := parseNodes(t, c.MustCrictl(t, "exec", id, "sh", "-c", listXPUs).Stdout)
	// The shim edits the container's own process; crictl exec starts others
	// from containerd's copy of the spec, so read that process's variables
	// from the host.
	env := containerProcessEnv(t, c, id)
	wantNodes, wantEnv := expectWithVisible(tree, 0, 7)
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantEnv, env)
}

// containerProcessEnv returns the XPU variables of the main process of a CRI
// container, sorted.
func containerProcessEnv(t *testing.T, c *harness.Containerd, id string) []string {
	t.Helper()
	var out struct {
		Info struct {
			Pid int `json:"pid"`
		} `json:"info"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.MustCrictl(t, "inspect", id).Stdout), &out))
	require.NotZero(t, out.Info.Pid)
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", out.Info.Pid))
	require.NoError(t, err)
	var env []string
	for _, e := range strings.Split(string(data), "\x00") {
		if strings.HasPrefix(e, "XPU") {
			env = append(env, e)
		}
	}
	sort.Strings(env)
	return env
}
