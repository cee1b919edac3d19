package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
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
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
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
		"--device-plugin-path", dir, "--poll-interval", "200ms", "--log-level", "debug",
		// A free port: tests run several plugins at once.
		"--health-address", "127.0.0.1:0",
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
func kubeletDir(t *testing.T) string { return testutil.ShortDir(t, "xe2e-kubelet-") }

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
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

// dpEngine starts a CRI engine whose runtime handler "xpu" is the
// xpu-container-runtime wrapper shim (runc below it); its default handler
// stays runc.
type dpEngine struct {
	name  string
	start func(t *testing.T, shim string) harness.CRI
}

var dpEngines = []dpEngine{
	{"containerd2", func(t *testing.T, shim string) harness.CRI {
		return harness.NewContainerd(t, harness.WithContainerdConfig(`[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.xpu]
  runtime_type = "io.containerd.runc.v2"
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.xpu.options]
    BinaryName = "`+shim+`"`))
	}},
	{"crio", func(t *testing.T, shim string) harness.CRI {
		return harness.NewCRIO(t, harness.WithCRIOConfigEdit(func(t testing.TB, c *harness.CRIO) {
			// What `xpu-cdi runtime configure --runtime crio` registers,
			// plus a runtime root of the test's own (CRI-O's default for
			// a handler without one is the host's /run/crun).
			dropIn := fmt.Sprintf("[crio.runtime.runtimes.xpu]\nruntime_path = %q\nruntime_type = \"oci\"\nruntime_root = %q\n",
				shim, filepath.Join(c.Dir, "xpu-runc"))
			require.NoError(t, os.WriteFile(filepath.Join(c.ConfigDir, "50-xpu.conf"), []byte(dropIn), 0o644))
		}))
	}},
}

// TestDevicePluginCRI registers the real xpu-device-plugin with a test
// kubelet side (the real Registration API on a temporary kubelet.sock), once
// per device list strategy, and turns its Allocate answer into a real CRI
// container on containerd 2.x and on CRI-O, as the kubelet would: cdi-cri
// as the CRI CDI_devices field and cdi-annotations as a container
// annotation, both resolved by the engine itself from the spec xpu-cdi
// wrote (the shim does not run); volume-mounts as CRI mounts of /dev/null
// with the shim as runtime handler, in a pod that also sets
// XPU_VISIBLE_DEVICES=all itself (what widened the removed envvar
// strategy's grant). The container sees exactly the allocated XPUs: those
// nodes with the host's major:minor and /dev/xpuctrl, its /dev is that of a
// container without devices plus those nodes, one XPU_CDI_DEVICE_<n> per
// device, and the driver library loads (the hook ran).
func TestDevicePluginCRI(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "crictl"))
	rootfs := glibcRootfs(t)
	vendor := harness.UniqueVendor(t)
	spec := GenerateSpec(t, tree, vendor)
	shim, shimLog := shimRuntime(t, tree, "")

	cases := []struct {
		description string
		strategy    string
		ids         []string
		handler     string // the CRI runtime handler, "" for runc
		// answer checks the Allocate answer of the strategy.
		answer func(t *testing.T, resp *pluginapi.ContainerAllocateResponse)
		want   []int
	}{
		{
			description: "cdi-cri: CDI_devices", strategy: "cdi-cri", ids: []string{"2", "5"},
			answer: func(t *testing.T, resp *pluginapi.ContainerAllocateResponse) {
				require.Len(t, resp.CdiDevices, 2)
				require.Equal(t, vendor+"/xpu=2", resp.CdiDevices[0].Name)
				require.Equal(t, vendor+"/xpu=5", resp.CdiDevices[1].Name)
				require.Empty(t, resp.Annotations)
				require.Empty(t, resp.Envs)
			},
			want: []int{2, 5},
		},
		{
			description: "cdi-annotations: container annotation", strategy: "cdi-annotations", ids: []string{"3", "6"},
			answer: func(t *testing.T, resp *pluginapi.ContainerAllocateResponse) {
				require.Equal(t, map[string]string{"cdi.k8s.io/xpu-device-plugin_xpu": vendor + "/xpu=3," + vendor + "/xpu=6"}, resp.Annotations)
				require.Empty(t, resp.CdiDevices)
				require.Empty(t, resp.Envs)
			},
			want: []int{3, 6},
		},
		{
			description: "volume-mounts: mounts through the shim, the pod asks for all", strategy: "volume-mounts", ids: []string{"0", "7"}, handler: "xpu",
			answer: func(t *testing.T, resp *pluginapi.ContainerAllocateResponse) {
				require.Equal(t, []*pluginapi.Mount{
					{ContainerPath: "/var/run/xpu-container-devices/0", HostPath: "/dev/null", ReadOnly: true},
					{ContainerPath: "/var/run/xpu-container-devices/7", HostPath: "/dev/null", ReadOnly: true},
				}, resp.Mounts)
				require.Empty(t, resp.Envs)
				require.Empty(t, resp.CdiDevices)
				require.Empty(t, resp.Annotations)
			},
			want: []int{0, 7},
		},
	}

	for _, engine := range dpEngines {
		t.Run(engine.name, func(t *testing.T) {
			cri := engine.start(t, shim)
			harness.PrepareCRI(t, cri)
			image := cri.ImportCRIImage(t, rootfs, "xpu-e2e-glibc")
			cri.WriteSpec(t, spec, vendor)
			baseline := devEntries(harness.CRIRunToCompletion(t, cri, harness.CRIContainer{
				Name: "xpu-dp-none", Image: image, Command: []string{"sh", "-c", `for f in /dev/*; do echo "dev-entry $f"; done`},
			}))
			require.NotEmpty(t, baseline)

			for i, tc := range cases {
				t.Run(tc.description, func(t *testing.T) {
					ctx := testCtx(t)
					dir := kubeletDir(t)
					k, err := kubelettest.Start(dir)
					require.NoError(t, err)
					t.Cleanup(k.Stop)
					specDir := cri.SpecDir()
					if tc.strategy == "volume-mounts" {
						specDir = t.TempDir() // no spec check: the shim in jit mode needs none
					}
					plugin := startDevicePlugin(t, tree, dir, "--vendor", vendor, "--device-list-strategy", tc.strategy, "--cdi-spec-dir", specDir)
					reg, err := k.WaitRegistration(ctx)
					require.NoError(t, err, plugin.log.String())
					_, err = reg.WaitDevices(ctx, func(d []*pluginapi.Device) bool {
						healthy := 0
						for _, x := range d {
							if x.Health == pluginapi.Healthy {
								healthy++
							}
						}
						return healthy == 8
					})
					require.NoError(t, err, plugin.log.String())

					resp, err := allocate(ctx, reg, tc.ids...)
					require.NoError(t, err)
					tc.answer(t, resp)
					var names []string
					for _, d := range resp.CdiDevices {
						names = append(names, d.Name)
					}

					var mounts []harness.CRIMount
					podEnv := resp.Envs
					for _, m := range resp.Mounts {
						mounts = append(mounts, harness.CRIMount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, ReadOnly: m.ReadOnly})
						// The kubelet puts the pod's own variables after the
						// plugin's: this one must not widen the grant.
						podEnv = map[string]string{"XPU_VISIBLE_DEVICES": "all"}
					}
					size := fileSize(t, shimLog)
					id, out := harness.CRIRunToExit(t, cri, harness.CRIContainer{
						Name:           fmt.Sprintf("xpu-dp-%d", i),
						Image:          image,
						Command:        []string{"sh", "-c", listXPUsAndLoad},
						CDIDevices:     names,
						Annotations:    resp.Annotations,
						Env:            podEnv,
						Mounts:         mounts,
						RuntimeHandler: tc.handler,
					})
					nodes, env := parseNodes(t, out)
					wantNodes, wantEnv := expect(tree, tc.want...)
					if tc.handler == "xpu" {
						wantNodes, wantEnv = expectWithVisible(tree, tc.want...)
						requireShimLogged(t, shimLog, size)
					} else {
						require.Equal(t, size, fileSize(t, shimLog), "the shim ran for runtime handler runc")
					}
					require.Equal(t, wantNodes, nodes, "exactly the allocated nodes and /dev/xpuctrl, with the host's major:minor")
					require.Equal(t, wantEnv, env)
					require.Contains(t, out, fmt.Sprintf("xpu devices: %d\n", len(tc.want)),
						"xpu-test must load libxpurt.so.1 (the hook ran) and count the allocated devices")
					wantDev := maps.Clone(baseline)
					for node := range wantNodes {
						wantDev[node] = true
					}
					require.Equal(t, wantDev, devEntries(out), "/dev must hold what it holds without devices, plus the XPU nodes and nothing else")
					if _, ok := cri.(*harness.Containerd); ok && len(names) > 0 {
						// containerd's CRI keeps the CDI request with the
						// container; CRI-O's status shows only the
						// resolved OCI spec.
						require.Contains(t, cri.MustCrictl(t, "inspect", id).Stdout, names[len(names)-1])
					}
				})
			}
		})
	}
}

// TestDevicePluginHealthAndLifecycle: the real plugin, registered with the
// test kubelet side, prefers devices of one NUMA node, takes a device whose
// driver state turns ERROR out of what can be allocated, names bad IDs,
// registers again after a kubelet restart and removes its socket on
// SIGTERM. No engine is involved.
func TestDevicePluginHealthAndLifecycle(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	vendor := harness.UniqueVendor(t)
	specDir := t.TempDir()
	harness.WriteSpec(t, specDir, GenerateSpec(t, tree, vendor), vendor)
	ctx := testCtx(t)

	dir := kubeletDir(t)
	k, err := kubelettest.Start(dir)
	require.NoError(t, err)
	t.Cleanup(k.Stop)
	plugin := startDevicePlugin(t, tree, dir, "--vendor", vendor, "--cdi-spec-dir", specDir)

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

// TestDevicePluginContainerd16Shim: containerd 1.6 has no CDI, so its nodes
// use the cdi-annotations strategy with xpu-container-runtime as the CRI
// plugin's default runtime, registered by `xpu-cdi runtime configure
// --runtime containerd --set-as-default` on a version 2 main file. The
// plugin's annotation reaches the shim because the registered runtime lists
// it in container_annotations, and the container sees exactly the
// allocated XPUs. Two controls: the same annotation with runtime handler
// runc gives nothing (containerd 1.6 does not resolve it), and through a
// shim runtime entry without container_annotations the shim never sees it.
func TestDevicePluginContainerd16Shim(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "crictl"))
	rootfs := glibcRootfs(t)
	vendor := harness.UniqueVendor(t)
	// The node's spec, read by the plugin's check and by the shim (cdi mode).
	specDir := t.TempDir()
	harness.WriteSpec(t, specDir, GenerateSpec(t, tree, vendor), vendor)
	shim, shimLog := shimRuntime(t, tree, fmt.Sprintf("mode = \"cdi\"\nvendor = %q\nspec-dirs = [%q]\n", vendor, specDir))
	c := harness.NewContainerd16(t, harness.WithCRI(),
		harness.WithContainerdConfig(`[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.xpu-plain]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.xpu-plain.options]
    BinaryName = "`+shim+`"`),
		harness.WithConfigEdit(func(t testing.TB, path string) {
			configureRuntime(t, "--runtime", "containerd", "--config", path,
				"--drop-in-file", filepath.Join(filepath.Dir(path), "conf.d", "99-xpu.toml"),
				"--runtime-path", shim, "--set-as-default")
		}))
	harness.PrepareCRI(t, c)
	image := c.ImportCRIImage(t, rootfs, "xpu-e2e-glibc")
	baseline := devEntries(harness.CRIRunToCompletion(t, c, harness.CRIContainer{
		Name: "xpu-dp16-none", Image: image, Command: []string{"sh", "-c", `for f in /dev/*; do echo "dev-entry $f"; done`},
	}))
	require.NotEmpty(t, baseline)

	ctx := testCtx(t)
	dir := kubeletDir(t)
	k, err := kubelettest.Start(dir)
	require.NoError(t, err)
	t.Cleanup(k.Stop)
	plugin := startDevicePlugin(t, tree, dir, "--vendor", vendor, "--device-list-strategy", "cdi-annotations", "--cdi-spec-dir", specDir)
	reg, err := k.WaitRegistration(ctx)
	require.NoError(t, err, plugin.log.String())
	_, err = reg.WaitDevices(ctx, func(d []*pluginapi.Device) bool { return len(d) == 8 && d[6].Health == pluginapi.Healthy })
	require.NoError(t, err, plugin.log.String())
	resp, err := allocate(ctx, reg, "3", "6")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"cdi.k8s.io/xpu-device-plugin_xpu": vendor + "/xpu=3," + vendor + "/xpu=6"}, resp.Annotations)

	t.Run("default runtime: the shim", func(t *testing.T) {
		size := fileSize(t, shimLog)
		out := harness.CRIRunToCompletion(t, c, harness.CRIContainer{
			Name: "xpu-dp16", Image: image, Command: []string{"sh", "-c", listXPUsAndLoad}, Annotations: resp.Annotations,
		})
		requireShimLogged(t, shimLog, size)
		nodes, env := parseNodes(t, out)
		wantNodes, wantEnv := expectWithVisible(tree, 3, 6)
		require.Equal(t, wantNodes, nodes, "exactly the allocated nodes and /dev/xpuctrl, with the host's major:minor")
		require.Equal(t, wantEnv, env)
		require.Contains(t, out, "xpu devices: 2\n", "xpu-test must load libxpurt.so.1 (the hook ran) and count the allocated devices")
		wantDev := maps.Clone(baseline)
		for node := range wantNodes {
			wantDev[node] = true
		}
		require.Equal(t, wantDev, devEntries(out), "/dev must hold what it holds without devices, plus the XPU nodes and nothing else")
	})

	for _, handler := range []string{"runc", "xpu-plain"} {
		t.Run("handler "+handler+": no XPU", func(t *testing.T) {
			size := fileSize(t, shimLog)
			out := harness.CRIRunToCompletion(t, c, harness.CRIContainer{
				Name: "xpu-dp16-" + handler, Image: image, Command: []string{"sh", "-c", listXPUs}, Annotations: resp.Annotations, RuntimeHandler: handler,
			})
			nodes, env := parseNodes(t, out)
			require.Empty(t, nodes)
			require.Empty(t, env)
			if handler == "xpu-plain" {
				// The shim ran and found no request in the OCI spec.
				requireShimLogged(t, shimLog, size)
				log, err := os.ReadFile(shimLog)
				require.NoError(t, err)
				require.Contains(t, string(log[size:]), "asks for no XPU")
				require.NotContains(t, string(log[size:]), "gave XPUs")
			} else {
				require.Equal(t, size, fileSize(t, shimLog), "the shim ran for runtime handler runc")
			}
		})
	}
}
