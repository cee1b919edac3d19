package e2e

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// kubeletNode is the node name of the test kubelet; static pods are named
// <name>-<node>.
const kubeletNode = "xpu-e2e-node"

// testKubelet is a standalone kubelet (no API server) running static pods
// from a manifest directory against a containerd 2.x.
type testKubelet struct {
	manifests string
	port      int
	healthz   int
	log       string
	client    *http.Client
}

// claimKubelet takes the machine's kubelet paths for the test
// (harness.ClaimKubeletHost) and returns the private directory of the
// test's kubelet, for startKubelet.
func claimKubelet(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "xe2e-kubelet-")
	require.NoError(t, err)
	harness.ClaimKubeletHost(t, kubeletNode, filepath.Join(dir, "pod-logs"))
	return dir
}

// unmountUnder detaches every mount below dir (the kubelet makes its root
// directory a shared bind mount of itself).
func unmountUnder(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Errorf("reading mountinfo: %v", err)
		return
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			mounts = append(mounts, fields[4])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := syscall.Unmount(mounts[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			t.Errorf("unmounting %s: %v", mounts[i], err)
		}
	}
}

// startKubelet starts the kubelet (harness.KubernetesVersion) standalone in
// dir (claimKubelet) against containerd c, with extra command line
// arguments.
func startKubelet(t *testing.T, dir string, c *harness.Containerd, extra ...string) *testKubelet {
	t.Helper()
	bin := harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "kubelet"))
	k := &testKubelet{
		manifests: filepath.Join(dir, "manifests"),
		port:      harness.FreePort(t),
		healthz:   harness.FreePort(t),
		log:       filepath.Join(dir, "kubelet.log"),
	}
	require.NoError(t, os.Mkdir(k.manifests, 0o755))
	root := filepath.Join(dir, "root")
	cfg := harness.KubeletConfig(harness.KubeletDirs{
		StaticPods:    k.manifests,
		PodLogs:       filepath.Join(dir, "pod-logs"),
		VolumePlugins: filepath.Join(dir, "volume-plugins"),
	}, k.port, k.healthz, "unix://"+c.Address)
	// Standalone: no QoS or pod cgroups of its own.
	cfg.CgroupsPerQOS = ptr.To(false)
	data, err := harness.MarshalKubeletConfig(cfg)
	require.NoError(t, err)
	cfgPath := filepath.Join(dir, "kubelet.yaml")
	require.NoError(t, os.WriteFile(cfgPath, data, 0o644))
	logFile, err := os.Create(k.log)
	require.NoError(t, err)

	args := []string{
		"--config", cfgPath, "--root-dir", root, "--cert-dir", filepath.Join(dir, "pki"),
		"--hostname-override", kubeletNode, "--v", "2",
	}
	cmd := exec.Command(bin, append(args, extra...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
		if t.Failed() {
			data, _ := os.ReadFile(k.log)
			lines := strings.Split(string(data), "\n")
			if len(lines) > 80 {
				lines = lines[len(lines)-80:]
			}
			t.Logf("kubelet log %s, last lines:\n%s", k.log, strings.Join(lines, "\n"))
		}
		unmountUnder(t, dir)
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		}
	})

	k.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		// The kubelet serves a self-signed certificate on loopback.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	require.Eventually(t, func() bool {
		select {
		case <-done:
			return true
		default:
		}
		resp, err := k.client.Get("http://127.0.0.1:" + strconv.Itoa(k.healthz) + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 90*time.Second, 250*time.Millisecond)
	select {
	case <-done:
		data, _ := os.ReadFile(k.log)
		t.Fatalf("the kubelet exited:\n%s", data)
	default:
	}
	return k
}

// staticPod writes a static pod whose container asks for xpus XPUs.
func (k *testKubelet) staticPod(t *testing.T, name, image string, xpus int) {
	t.Helper()
	k.writeStaticPod(t, testPod(name, image, asStaticPod, withLimit("baidu.com/xpu", int64(xpus))))
}

// writeStaticPod writes pod's manifest into the kubelet's static pod
// directory.
func (k *testKubelet) writeStaticPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	manifest, err := harness.Manifest(pod)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(k.manifests, pod.Name+".yaml"), manifest, 0o644))
}

// pod returns the kubelet's view of a static pod (GET /pods).
func (k *testKubelet) pod(name string) (*corev1.Pod, error) {
	resp, err := k.client.Get("https://127.0.0.1:" + strconv.Itoa(k.port) + "/pods")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list corev1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("decoding /pods: %w", err)
	}
	for i := range list.Items {
		if list.Items[i].Name == name+"-"+kubeletNode {
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no pod %s-%s", name, kubeletNode)
}

// waitRefused waits until the kubelet rejected a pod at admission and
// returns its status reason and message.
func (k *testKubelet) waitRefused(t *testing.T, name string) (string, string) {
	t.Helper()
	var reason, msg string
	require.Eventually(t, func() bool {
		p, err := k.pod(name)
		if err != nil || p.Status.Phase != corev1.PodFailed {
			return false
		}
		reason, msg = p.Status.Reason, p.Status.Message
		return true
	}, 60*time.Second, 250*time.Millisecond, "pod %s was not refused", name)
	return reason, msg
}

// runningContainer waits for the main container of a static pod and returns
// its CRI ID.
func runningContainer(t *testing.T, c *harness.Containerd, name string) string {
	t.Helper()
	var id string
	testutil.Eventually(t, func(t testing.TB) bool {
		r := c.Crictl(t, "ps", "--quiet", "--state", "Running", "--name", "^main$", "--label", "io.kubernetes.pod.name="+name+"-"+kubeletNode)
		id = strings.TrimSpace(r.Stdout)
		return r.Success() && id != "" && !strings.Contains(id, "\n")
	}, 90*time.Second, 500*time.Millisecond, "no running container for pod %s", name)
	return id
}

// cdiDevicesOf returns the CDI_devices of a CRI container (crictl inspect).
func cdiDevicesOf(t *testing.T, c *harness.Containerd, id string) []string {
	t.Helper()
	var out struct {
		Info struct {
			Config struct {
				CDIDevices []struct {
					Name string `json:"name"`
				} `json:"CDI_devices"`
			} `json:"config"`
		} `json:"info"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.MustCrictl(t, "inspect", id).Stdout), &out))
	var names []string
	for _, d := range out.Info.Config.CDIDevices {
		names = append(names, d.Name)
	}
	return names
}

// indexOf returns the N of VENDOR/xpu=N.
func indexOf(t *testing.T, name string) int {
	t.Helper()
	_, n, ok := strings.Cut(name, "=")
	require.True(t, ok, name)
	i, err := strconv.Atoi(n)
	require.NoError(t, err, name)
	return i
}

// TestKubeletDevicePlugin runs the kubelet (harness.KubernetesVersion) standalone (static pods, no API
// server) against containerd 2.x with the real xpu-device-plugin on a fake
// 8-XPU host: a pod asking for one XPU runs with exactly the allocated one
// (the CRI CDI_devices field holds its name), a pod asking for more than is
// free is refused by the kubelet's admission, and a device turning unhealthy
// is no longer allocatable.
func TestKubeletDevicePlugin(t *testing.T) {
	harness.RequiresRoot(t)
	harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "kubelet"))
	harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "crictl"))
	tree := FakeHost(t, fakehost.P800x8())
	c := harness.NewContainerd(t)
	vendor := harness.UniqueVendor(t)
	c.WriteSpec(t, GenerateSpec(t, tree, vendor), vendor)
	image := importCRIImages(t, c)
	dir := claimKubelet(t)

	// The plugin first: it waits for the kubelet and registers when it comes.
	plugin := startDevicePlugin(t, tree, harness.DevicePluginDir, "--vendor", vendor, "--cdi-spec-dir", c.SpecDir())
	require.Eventually(t, func() bool { return strings.Contains(plugin.log.String(), "waiting for the kubelet") }, 30*time.Second, 50*time.Millisecond)
	k := startKubelet(t, dir, c)
	require.Eventually(t, func() bool { return strings.Contains(plugin.log.String(), "registered baidu.com/xpu with the kubelet") },
		60*time.Second, 100*time.Millisecond, "the plugin did not register:\n%s", plugin.log.String())

	// One XPU: runs with exactly the allocated device.
	k.staticPod(t, "xpu-one", image, 1)
	id := runningContainer(t, c, "xpu-one")
	cdi := cdiDevicesOf(t, c, id)
	require.Len(t, cdi, 1, "the CRI container must carry the CDI name the plugin answered")
	require.True(t, strings.HasPrefix(cdi[0], vendor+"/xpu="), cdi[0])
	first := indexOf(t, cdi[0])
	nodes, env := parseNodes(t, c.MustCrictl(t, "exec", id, "sh", "-c", listXPUs).Stdout)
	wantNodes, wantEnv := expect(tree, first)
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantEnv, env)
	require.Contains(t, plugin.log.String(), fmt.Sprintf("allocated baidu.com/xpu %d (cdi-cri)", first))

	// More than is free (7 of 8): refused at admission.
	k.staticPod(t, "xpu-eight", image, 8)
	reason, msg := k.waitRefused(t, "xpu-eight")
	t.Logf("8 XPUs with 7 free: %s: %s", reason, msg)
	require.Equal(t, "UnexpectedAdmissionError", reason)
	require.Contains(t, msg, "requested number of devices unavailable for baidu.com/xpu. Requested: 8, Available: 7")

	// A free device turns unhealthy: 7 are no longer allocatable, 6 are.
	bad := (first + 1) % 8
	require.NoError(t, os.WriteFile(tree.Path(fmt.Sprintf("/proc/xpu/dev%d/state", bad)), []byte("ERROR\n"), 0o666))
	require.Eventually(t, func() bool {
		return strings.Contains(plugin.log.String(), fmt.Sprintf("%d (numa %d, Unhealthy: the driver reports state ERROR)", bad, bad/4))
	}, 30*time.Second, 100*time.Millisecond, plugin.log.String())
	// The kubelet takes the new list on its ListAndWatch stream.
	time.Sleep(2 * time.Second)
	k.staticPod(t, "xpu-seven", image, 7)
	reason, msg = k.waitRefused(t, "xpu-seven")
	t.Logf("7 XPUs with 7 free, one of them unhealthy: %s: %s", reason, msg)
	require.Equal(t, "UnexpectedAdmissionError", reason)
	require.Contains(t, msg, "requested number of devices unavailable for baidu.com/xpu. Requested: 7, Available: 6")

	k.staticPod(t, "xpu-six", image, 6)
	id = runningContainer(t, c, "xpu-six")
	cdi = cdiDevicesOf(t, c, id)
	require.Len(t, cdi, 6)
	var got []int
	for _, n := range cdi {
		i := indexOf(t, n)
		require.NotEqual(t, first, i, "the device of xpu-one is not given twice")
		require.NotEqual(t, bad, i, "the unhealthy device is not given")
		got = append(got, i)
	}
	nodes, _ = parseNodes(t, c.MustCrictl(t, "exec", id, "sh", "-c", listXPUs).Stdout)
	wantNodes, _ = expect(tree, got...)
	require.Equal(t, wantNodes, nodes)
}
