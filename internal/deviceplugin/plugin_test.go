package deviceplugin

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/xpu-cdi/xpu-cdi/internal/deviceplugin/kubelettest"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func TestParseStrategyAndResourceName(t *testing.T) {
	for _, s := range []string{"cdi-cri", "cdi-annotations", "volume-mounts"} {
		got, err := ParseStrategy(s)
		require.NoError(t, err)
		require.Equal(t, Strategy(s), got)
	}
	_, err := ParseStrategy("mounts")
	require.ErrorContains(t, err, `unknown device list strategy "mounts": use one of cdi-cri, cdi-annotations, volume-mounts`)
	_, err = ParseStrategy("envvar")
	require.ErrorContains(t, err, `device list strategy "envvar" was removed: a pod or its image can set XPU_VISIBLE_DEVICES itself`)
	require.ErrorContains(t, err, "use cdi-annotations (the same shim, an answer a pod cannot forge), cdi-cri, or volume-mounts where no pod may use hostPath volumes")

	for _, tc := range []struct {
		name, err string
	}{
		{"baidu.com/xpu", ""},
		{"kunlunxin.com/xpu", ""},
		{"xpu", "is not DOMAIN/NAME"},
		{"/xpu", "is not DOMAIN/NAME"},
		{"Baidu.com/xpu", "not a lower-case DNS subdomain"},
		{"kubernetes.io/xpu", "reserved"},
		{"baidu.com/x/pu", "must be at most 63"},
		{"baidu.com/" + strings.Repeat("x", 64), "must be at most 63"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateResourceName(tc.name)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
	_, err = New(Config{ResourceName: "xpu"})
	require.Error(t, err)
}

func TestAllocateStrategies(t *testing.T) {
	tree := fakeTree(t, fakehost.P800x8())
	for _, tc := range []struct {
		strategy Strategy
		ids      []string
		want     *pluginapi.ContainerAllocateResponse
	}{
		{StrategyCDICRI, []string{"3"}, &pluginapi.ContainerAllocateResponse{
			CdiDevices: []*pluginapi.CDIDevice{{Name: "baidu.com/xpu=3"}},
		}},
		{StrategyCDICRI, []string{"0", "5"}, &pluginapi.ContainerAllocateResponse{
			CdiDevices: []*pluginapi.CDIDevice{{Name: "baidu.com/xpu=0"}, {Name: "baidu.com/xpu=5"}},
		}},
		{StrategyCDIAnnotations, []string{"1", "2"}, &pluginapi.ContainerAllocateResponse{
			Annotations: map[string]string{"cdi.k8s.io/xpu-device-plugin_xpu": "baidu.com/xpu=1,baidu.com/xpu=2"},
		}},
		{StrategyVolumeMounts, []string{"7", "6"}, &pluginapi.ContainerAllocateResponse{
			Mounts: []*pluginapi.Mount{
				{ContainerPath: "/var/run/xpu-container-devices/7", HostPath: "/dev/null", ReadOnly: true},
				{ContainerPath: "/var/run/xpu-container-devices/6", HostPath: "/dev/null", ReadOnly: true},
			},
		}},
	} {
		t.Run(string(tc.strategy)+"/"+strings.Join(tc.ids, ","), func(t *testing.T) {
			p, _ := newPlugin(t, tree, &logtest.Recorder{}, func(c *Config) { c.Strategy = tc.strategy })
			p.Refresh()
			resp, err := p.Whole().Allocate(context.Background(), &pluginapi.AllocateRequest{
				ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: tc.ids}},
			})
			require.NoError(t, err)
			require.Len(t, resp.ContainerResponses, 1)
			got := resp.ContainerResponses[0]
			require.Equal(t, tc.want.CdiDevices, got.CdiDevices)
			require.Equal(t, tc.want.Annotations, got.Annotations)
			require.Empty(t, got.Envs, "never a variable: the pod sets its own")
			require.Equal(t, tc.want.Mounts, got.Mounts)
			require.Empty(t, got.Devices, "no device nodes of its own: CDI adds them")
			if tc.strategy == StrategyCDIAnnotations {
				// The annotation is what the CDI library (and the shim) parse.
				_, names, err := cdiapi.ParseAnnotations(got.Annotations)
				require.NoError(t, err)
				require.Equal(t, []string{"baidu.com/xpu=1", "baidu.com/xpu=2"}, names)
			}
		})
	}

	t.Run("another kind and two containers", func(t *testing.T) {
		p, err := New(Config{Discover: discoverTree(tree), Strategy: StrategyVolumeMounts, Kind: "example.com/npu", ResourceName: "kunlunxin.com/xpu"})
		require.NoError(t, err)
		p.Refresh()
		resp, err := p.Whole().Allocate(context.Background(), &pluginapi.AllocateRequest{
			ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"0"}}, {DevicesIds: []string{"4", "5"}}},
		})
		require.NoError(t, err)
		require.Len(t, resp.ContainerResponses, 2)
		require.Len(t, resp.ContainerResponses[0].Mounts, 1)
		require.Equal(t, "/var/run/xpu-container-devices/0", resp.ContainerResponses[0].Mounts[0].ContainerPath)
		require.Len(t, resp.ContainerResponses[1].Mounts, 2)
		require.Equal(t, "/var/run/xpu-container-devices/5", resp.ContainerResponses[1].Mounts[1].ContainerPath)
	})
}

func TestAllocateBadIDs(t *testing.T) {
	h := fakehost.P800x8()
	h.Devices[2].State = "ERROR"
	tree := fakeTree(t, h)
	p, _ := newPlugin(t, tree, &logtest.Recorder{})
	p.Refresh()
	for _, tc := range []struct {
		ids  []string
		code codes.Code
		msg  string
	}{
		{[]string{"8"}, codes.InvalidArgument, `baidu.com/xpu device "8" is not a device of this node (advertised: 0,1,2,3,4,5,6,7)`},
		{[]string{"0", "xpu1"}, codes.InvalidArgument, `device "xpu1" is not a device of this node`},
		{[]string{""}, codes.InvalidArgument, `device "" is not a device of this node`},
		{[]string{"1", "2"}, codes.FailedPrecondition, `baidu.com/xpu device "2" is Unhealthy: the driver reports state ERROR`},
		{[]string{"1", "3", "1"}, codes.InvalidArgument, `baidu.com/xpu device "1" is requested twice for one container`},
	} {
		t.Run(strings.Join(tc.ids, ","), func(t *testing.T) {
			resp, err := p.Whole().Allocate(context.Background(), &pluginapi.AllocateRequest{
				ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"0"}}, {DevicesIds: tc.ids}},
			})
			require.Nil(t, resp, "a bad ID fails the whole request")
			require.Equal(t, tc.code, status.Code(err), "%v", err)
			require.Contains(t, status.Convert(err).Message(), tc.msg)
		})
	}
}

func TestPreferredAllocation(t *testing.T) {
	// P800x8: devices 0-3 on NUMA node 0, 4-7 on node 1.
	tree := fakeTree(t, fakehost.P800x8())
	p, _ := newPlugin(t, tree, &logtest.Recorder{})
	p.Refresh()
	all := []string{"0", "1", "2", "3", "4", "5", "6", "7"}
	for _, tc := range []struct {
		description string
		available   []string
		must        []string
		size        int32
		want        []string
	}{
		{"one device: lowest index of the best-fitting node", all, nil, 1, []string{"0"}},
		{"fits on one node", all, nil, 4, []string{"0", "1", "2", "3"}},
		{"best fit: the node with fewer free devices", []string{"0", "1", "2", "3", "5", "6"}, nil, 2, []string{"5", "6"}},
		{"tie: lower node", []string{"2", "3", "6", "7"}, nil, 2, []string{"2", "3"}},
		{"node 0 too small, node 1 fits", []string{"0", "4", "5", "6"}, nil, 3, []string{"4", "5", "6"}},
		{"must-include pulls its node", all, []string{"6"}, 2, []string{"4", "6"}},
		{"must-include node full: lowest indices, its node first", []string{"0", "1", "2", "3", "7"}, []string{"7"}, 3, []string{"0", "1", "7"}},
		{"does not fit one node: lowest indices", all, nil, 6, []string{"0", "1", "2", "3", "4", "5"}},
		{"index order is numeric", []string{"7", "5", "4", "6"}, nil, 2, []string{"4", "5"}},
		{"unknown IDs ignored", []string{"9", "0"}, nil, 1, []string{"0"}},
		{"size above what is available", []string{"1", "2"}, nil, 3, []string{"1", "2"}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			resp, err := p.Whole().GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
				ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
					AvailableDeviceIDs: tc.available, MustIncludeDeviceIDs: tc.must, AllocationSize: tc.size,
				}},
			})
			require.NoError(t, err)
			require.Len(t, resp.ContainerResponses, 1)
			require.Equal(t, tc.want, resp.ContainerResponses[0].DeviceIDs)
		})
	}
}

func TestListAndWatchTopologyAndHealthChanges(t *testing.T) {
	tree := fakeTree(t, fakehost.P800x8())
	log := &logtest.Recorder{}
	p, _ := newPlugin(t, tree, log)
	r := start(t, p)
	ctx := ctxT(t)

	require.Equal(t, "baidu.com/xpu", r.reg.Request.ResourceName)
	require.Equal(t, pluginapi.Version, r.reg.Request.Version)
	require.True(t, r.reg.Options.GetPreferredAllocationAvailable)

	devs, err := r.reg.NextDevices(ctx)
	require.NoError(t, err)
	require.Len(t, devs, 8)
	for i, d := range devs {
		require.Equal(t, pluginapi.Healthy, d.Health, d.ID)
		wantNode := int64(0)
		if i >= 4 {
			wantNode = 1
		}
		require.Equal(t, []*pluginapi.NUMANode{{ID: wantNode}}, d.Topology.Nodes, "device %s", d.ID)
	}

	// The driver reports an error on xpu2: the kubelet is told.
	state := tree.Path("/proc/xpu/dev2/state")
	require.NoError(t, os.WriteFile(state, []byte("ERROR\n"), 0o666))
	devs, err = r.reg.WaitDevices(ctx, func(d []*pluginapi.Device) bool { return health(d)["2"] == pluginapi.Unhealthy })
	require.NoError(t, err)
	h := health(devs)
	require.Len(t, h, 8)
	for id, v := range h {
		if id != "2" {
			require.Equal(t, pluginapi.Healthy, v, id)
		}
	}
	_, err = r.reg.Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"2"}}}})
	require.ErrorContains(t, err, `device "2" is Unhealthy: the driver reports state ERROR`)
	require.Eventually(t, func() bool { return log.Count("2 (numa 0, Unhealthy: the driver reports state ERROR)") == 1 }, 5*time.Second, 10*time.Millisecond, log.String())

	// Back to RUNNING: healthy again, and allocatable.
	require.NoError(t, os.WriteFile(state, []byte("RUNNING\n"), 0o666))
	_, err = r.reg.WaitDevices(ctx, func(d []*pluginapi.Device) bool { return health(d)["2"] == pluginapi.Healthy })
	require.NoError(t, err)
	resp, err := r.reg.Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"2"}}}})
	require.NoError(t, err)
	require.Equal(t, "baidu.com/xpu=2", resp.ContainerResponses[0].CdiDevices[0].Name)

	// A state change that does not change the health is not re-sent.
	require.NoError(t, os.WriteFile(state, []byte("LOWPOWER\n"), 0o666))
	time.Sleep(300 * time.Millisecond)
	select {
	case <-r.reg.Ended():
		t.Fatal("stream ended")
	default:
	}
	noUpdate, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = r.reg.NextDevices(noUpdate)
	require.ErrorIs(t, err, context.DeadlineExceeded, "an unchanged list must not be re-sent")

	// A device that goes away (its node removed) leaves the list.
	require.NoError(t, os.Remove(tree.Path("/dev/xpu7")))
	devs, err = r.reg.WaitDevices(ctx, func(d []*pluginapi.Device) bool { return len(d) == 7 })
	require.NoError(t, err)
	require.NotContains(t, health(devs), "7")
}

func TestReRegistersWhenTheKubeletRestarts(t *testing.T) {
	tree := fakeTree(t, fakehost.P800x8())
	log := &logtest.Recorder{}
	p, _ := newPlugin(t, tree, log)
	r := start(t, p)
	ctx := ctxT(t)
	_, err := r.reg.NextDevices(ctx)
	require.NoError(t, err)
	require.FileExists(t, p.SocketPath())
	require.Eventually(t, func() bool { return log.Count("registered baidu.com/xpu with the kubelet") == 1 }, 5*time.Second, 10*time.Millisecond, log.String())
	require.NoError(t, p.Ready(), "registered and serving: ready")

	for i := range 2 {
		// The restart removes the plugin's socket and re-creates kubelet.sock.
		require.NoError(t, r.kubelet.Restart())
		reg, err := r.kubelet.WaitRegistration(ctx)
		require.NoError(t, err, "restart %d\n%s", i, log.String())
		devs, err := reg.NextDevices(ctx)
		require.NoError(t, err)
		require.Len(t, devs, 8)
		resp, err := reg.Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"1"}}}})
		require.NoError(t, err)
		require.Equal(t, "baidu.com/xpu=1", resp.ContainerResponses[0].CdiDevices[0].Name)
		// The plugin logs after Register returned, which is after the
		// kubelet saw it: wait for that before the next restart (a restart
		// during Register is a failed registration, retried).
		require.Eventually(t, func() bool { return log.Count("registered baidu.com/xpu with the kubelet") == i+2 }, 5*time.Second, 10*time.Millisecond, log.String())
	}
	require.Equal(t, 2, log.Count("registering again"), log.String())
}

func TestWaitsForTheKubeletAndStopsCleanly(t *testing.T) {
	tree := fakeTree(t, fakehost.P800x8())
	log := &logtest.Recorder{}
	p, _ := newPlugin(t, tree, log)
	r := &running{plugin: p, done: make(chan error, 1)}
	r.run(t)
	require.Eventually(t, func() bool { return log.Count("waiting for the kubelet") == 1 }, 5*time.Second, 10*time.Millisecond)
	require.EqualError(t, p.Ready(), "not registered with the kubelet yet")
	time.Sleep(100 * time.Millisecond)
	require.NoFileExists(t, p.SocketPath(), "no socket before the kubelet is there")
	require.Equal(t, 1, log.Count("waiting for the kubelet"), "logged once")

	k, err := kubelettest.Start(p.o.PluginDir)
	require.NoError(t, err)
	t.Cleanup(k.Stop)
	reg, err := k.WaitRegistration(ctxT(t))
	require.NoError(t, err)
	_, err = reg.NextDevices(ctxT(t))
	require.NoError(t, err)

	r.cancel()
	select {
	case err := <-r.done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	r.done <- nil // for the cleanup
	require.NoFileExists(t, p.SocketPath(), "the socket is removed when the plugin stops")
	select {
	case <-reg.Ended():
	case <-time.After(5 * time.Second):
		t.Fatal("ListAndWatch did not end when the plugin stopped")
	}
}

func TestNoXPUAdvertisesZero(t *testing.T) {
	for _, tc := range []struct {
		description string
		host        func() fakehost.Host
		log         string
	}{
		{"no node at all", func() fakehost.Host { h := fakehost.P800x8(); h.NoNodes = true; return h }, "advertising no baidu.com/xpu: no Kunlun XPU found under"},
		{"every PF has VFs and no VF node", func() fakehost.Host {
			h := fakehost.R200SRIOV()
			// PF 0 with its 3 VFs enabled (xpu2-4) whose nodes are missing; no PF 1.
			h.Devices = append(h.Devices[:1], h.Devices[2:]...)
			for i := 1; i < len(h.Devices); i++ {
				h.Devices[i].NoNode = true
			}
			return h
		}, "is a physical function with SR-IOV VFs enabled and no VF node exists"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tree := fakeTree(t, tc.host())
			log := &logtest.Recorder{}
			p, err := New(Config{Discover: discoverTree(tree), PluginDir: shortDir(t), SpecDirs: []string{t.TempDir()}, HealthInterval: 30 * time.Millisecond, WatchInterval: 20 * time.Millisecond, Log: log})
			require.NoError(t, err)
			r := start(t, p)
			devs, err := r.reg.NextDevices(ctxT(t))
			require.NoError(t, err)
			require.Empty(t, devs)
			time.Sleep(200 * time.Millisecond) // several health checks
			require.Equal(t, 1, log.Count("advertising no baidu.com/xpu"), "logged once, not at every check:\n%s", log.String())
			if tc.log != "" {
				require.Contains(t, log.String(), tc.log)
			}
			require.NotContains(t, log.String(), "no CDI spec", "no device, no spec needed")
			select {
			case err := <-r.done:
				t.Fatalf("Run ended: %v", err)
			default:
			}
		})
	}
}

func TestSpecChecks(t *testing.T) {
	tree := fakeTree(t, fakehost.P800x8())

	t.Run("missing spec: Unhealthy until it exists, with the command", func(t *testing.T) {
		log := &logtest.Recorder{}
		specDir := t.TempDir()
		p, err := New(Config{Discover: discoverTree(tree), PluginDir: shortDir(t), SpecDirs: []string{specDir}, HealthInterval: 30 * time.Millisecond, WatchInterval: 20 * time.Millisecond, Log: log})
		require.NoError(t, err)
		r := start(t, p)
		ctx := ctxT(t)
		devs, err := r.reg.NextDevices(ctx)
		require.NoError(t, err)
		require.Len(t, devs, 8)
		for _, d := range devs {
			require.Equal(t, pluginapi.Unhealthy, d.Health)
		}
		require.Contains(t, log.String(), "error: no CDI spec of kind baidu.com/xpu in "+specDir)
		require.Contains(t, log.String(), "create it with: xpu-cdi generate --output /etc/cdi/baidu.com-xpu.yaml")

		fakehosttest.WriteSpec(t, tree, specDir)
		_, err = r.reg.WaitDevices(ctx, func(d []*pluginapi.Device) bool {
			for _, x := range d {
				if x.Health != pluginapi.Healthy {
					return false
				}
			}
			return len(d) == 8
		})
		require.NoError(t, err)
		require.Contains(t, log.String(), "info: the CDI specs of kind baidu.com/xpu now name every XPU")
	})

	t.Run("volume-mounts needs no spec", func(t *testing.T) {
		log := &logtest.Recorder{}
		p, err := New(Config{Discover: discoverTree(tree), SpecDirs: []string{t.TempDir()}, Strategy: StrategyVolumeMounts, Log: log})
		require.NoError(t, err)
		require.Contains(t, log.String(), "warning: device list strategy volume-mounts: a pod with a hostPath volume")
		p.Refresh()
		for _, d := range p.Devices() {
			require.Equal(t, pluginapi.Healthy, d.Health)
		}
	})

	t.Run("spec without some devices", func(t *testing.T) {
		log := &logtest.Recorder{}
		specDir := t.TempDir()
		path := fakehosttest.WriteSpec(t, tree, specDir)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		// Another kind in the same directory does not count.
		require.NoError(t, os.WriteFile(filepath.Join(specDir, "other.yaml"),
			[]byte(strings.ReplaceAll(string(data), "kind: baidu.com/xpu", "kind: example.com/xpu")), 0o644))
		require.NoError(t, os.Remove(path))
		p, err := New(Config{Discover: discoverTree(tree), SpecDirs: []string{specDir}, Log: log})
		require.NoError(t, err)
		p.Refresh()
		for _, d := range p.Devices() {
			require.Equal(t, pluginapi.Unhealthy, d.Health)
		}
	})

	t.Run("stale spec: warning naming xpu-cdi validate", func(t *testing.T) {
		log := &logtest.Recorder{}
		specDir := t.TempDir()
		path := fakehosttest.WriteSpec(t, tree, specDir)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		// The driver was reloaded with another major since the spec was written.
		require.Contains(t, string(data), "major: 243")
		require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(data), "major: 243", "major: 244")), 0o644))
		p, err := New(Config{Discover: discoverTree(tree), SpecDirs: []string{specDir}, Log: log})
		require.NoError(t, err)
		p.Refresh()
		p.Refresh()
		require.Equal(t, 1, log.Count("warning: CDI spec of kind baidu.com/xpu is stale against this host; run `xpu-cdi validate`"), log.String())
		require.Contains(t, log.String(), "/dev/xpu0 is 243:0 on this host but the spec says 244:0")
	})
}

// TestRetriesARefusingKubelet: a kubelet.sock nobody serves (a kubelet that
// died) is retried, logged once, and registration happens once it serves.
func TestRetriesARefusingKubelet(t *testing.T) {
	tree := fakeTree(t, fakehost.P800x8())
	log := &logtest.Recorder{}
	p, _ := newPlugin(t, tree, log)
	// A socket file without a listener: connection refused.
	k, err := kubelettest.Start(p.o.PluginDir)
	require.NoError(t, err)
	k.Stop()
	l, err := net.Listen("unix", filepath.Join(p.o.PluginDir, KubeletSocketName))
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())

	r := &running{plugin: p, done: make(chan error, 1)}
	r.run(t)
	require.Eventually(t, func() bool { return log.Count("registering baidu.com/xpu with the kubelet at") == 1 }, 10*time.Second, 10*time.Millisecond, log.String())
	time.Sleep(200 * time.Millisecond) // several retries
	require.Equal(t, 1, log.Count("registering baidu.com/xpu with the kubelet at"), "logged once:\n%s", log.String())

	k, err = kubelettest.Start(p.o.PluginDir)
	require.NoError(t, err)
	t.Cleanup(k.Stop)
	reg, err := k.WaitRegistration(ctxT(t))
	require.NoError(t, err)
	devs, err := reg.NextDevices(ctxT(t))
	require.NoError(t, err)
	require.Len(t, devs, 8)
}

// TestDeviceSetChanges: enabling SR-IOV VFs replaces a PF by its VFs,
// which under the mixed strategy are a resource of their own (three VFs of
// an R200 are 5 GiB each: baidu.com/xpu-5gb), registered as they appear;
// disabling them again empties that resource. Nothing restarts: the whole
// cards' stream goes on. The host is switched between two fake trees, as
// a driver reload or `echo 3 > sriov_numvfs` changes it.
func TestDeviceSetChanges(t *testing.T) {
	noVFs := fakehost.R200SRIOV()
	noVFs.Devices = noVFs.Devices[:2] // PF 0 and PF 1, VFs not enabled
	before := fakeTree(t, noVFs)
	after := fakeTree(t, fakehost.R200SRIOV()) // PF 0 with VFs xpu2-4, PF 1
	var mu sync.Mutex
	current := before
	set := func(tree *fakehost.Tree) {
		mu.Lock()
		current = tree
		mu.Unlock()
	}
	log := &logtest.Recorder{}
	p, err := New(Config{Strategy: StrategyVolumeMounts, PluginDir: shortDir(t), Log: log, HealthInterval: 30 * time.Millisecond, WatchInterval: 20 * time.Millisecond, Discover: func() (*discover.Host, error) {
		mu.Lock()
		defer mu.Unlock()
		return discover.Discover(current.DiscoverOptions()...)
	}})
	require.NoError(t, err)
	r := start(t, p)
	ctx := ctxT(t)
	devs, err := r.reg.NextDevices(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"0": pluginapi.Healthy, "1": pluginapi.Healthy}, health(devs))

	set(after)
	devs, err = r.reg.WaitDevices(ctx, func(d []*pluginapi.Device) bool { return len(d) == 1 })
	require.NoError(t, err)
	require.Equal(t, map[string]string{"1": pluginapi.Healthy}, health(devs), "PF 0 is cut: only the whole PF 1 is left")
	vfs, err := r.kubelet.WaitRegistration(ctx)
	require.NoError(t, err)
	require.Equal(t, "baidu.com/xpu-5gb", vfs.Request.ResourceName)
	require.Equal(t, "xpu-baidu.com_xpu-5gb.sock", vfs.Request.Endpoint)
	devs, err = vfs.WaitDevices(ctx, func(d []*pluginapi.Device) bool { return len(d) == 3 })
	require.NoError(t, err)
	require.Equal(t, map[string]string{"2": pluginapi.Healthy, "3": pluginapi.Healthy, "4": pluginapi.Healthy}, health(devs))
	for _, d := range devs {
		require.Equal(t, int64(0), d.Topology.Nodes[0].ID, "the VFs share PF 0's NUMA node: %s", d.ID)
	}
	_, err = r.reg.Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"0"}}}})
	require.ErrorContains(t, err, `device "0" is not a device of this node (advertised: 1)`)
	_, err = r.reg.Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"2"}}}})
	require.ErrorContains(t, err, `baidu.com/xpu device "2" is not a device of this node`, "a partition is not a whole card")
	resp, err := vfs.Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"3"}}}})
	require.NoError(t, err)
	require.Equal(t, "/var/run/xpu-container-devices/3", resp.ContainerResponses[0].Mounts[0].ContainerPath)
	// The kubelet has the registration before the plugin has its answer.
	require.Eventually(t, func() bool { return p.Ready() == nil }, 10*time.Second, 10*time.Millisecond, "ready: %v", p.Ready())

	// The VFs go: their resource advertises nothing, and stays registered.
	set(before)
	_, err = vfs.WaitDevices(ctx, func(d []*pluginapi.Device) bool { return len(d) == 0 })
	require.NoError(t, err)
	devs, err = r.reg.WaitDevices(ctx, func(d []*pluginapi.Device) bool { return len(d) == 2 })
	require.NoError(t, err)
	require.Equal(t, map[string]string{"0": pluginapi.Healthy, "1": pluginapi.Healthy}, health(devs))
	for _, reg := range []*kubelettest.Plugin{r.reg, vfs} {
		select {
		case <-reg.Ended():
			t.Fatalf("the stream of %s ended", reg.Request.ResourceName)
		default:
		}
	}
	require.Equal(t, 1, log.Count("registered baidu.com/xpu-5gb with the kubelet"), log.String())
}

func TestAPIDevicesTopology(t *testing.T) {
	got := apiDevices([]Device{
		{ID: "0", NUMANode: 1, Health: pluginapi.Healthy},
		{ID: "1", NUMANode: -1, Health: pluginapi.Unhealthy},
	})
	require.Equal(t, []*pluginapi.NUMANode{{ID: 1}}, got[0].Topology.Nodes)
	require.Nil(t, got[1].Topology, "no NUMA node known: no topology, so the kubelet does not align on a wrong node")
	require.Equal(t, pluginapi.Unhealthy, got[1].Health)
}

// TestListAndWatchTopologyP800Sysfs: on the P800 host whose nodes reach
// their PCI functions through /sys/dev/char only (no /sys/class/xpu, nodes
// not in address order), each device is advertised with the NUMA node of
// its own function.
func TestListAndWatchTopologyP800Sysfs(t *testing.T) {
	tree := fakeTree(t, fakehost.P800Sysfs())
	p, _ := newPlugin(t, tree, &logtest.Recorder{})
	r := start(t, p)
	devs, err := r.reg.NextDevices(ctxT(t))
	require.NoError(t, err)
	require.Len(t, devs, 8)
	want := map[string]int64{}
	for _, d := range tree.Devices {
		want[strconv.Itoa(d.Index)] = int64(d.NUMANode)
	}
	require.Equal(t, int64(1), want["0"], "xpu0 is on NUMA node 1 although its index is first")
	for _, d := range devs {
		require.NotNil(t, d.Topology, "device %s", d.ID)
		require.Equal(t, []*pluginapi.NUMANode{{ID: want[d.ID]}}, d.Topology.Nodes, "device %s", d.ID)
	}
}
