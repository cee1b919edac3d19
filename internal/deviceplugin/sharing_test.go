package deviceplugin

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	"github.com/xpu-cdi/xpu-cdi/internal/xpurequest"
)

func TestReplicaIDs(t *testing.T) {
	require.Equal(t, "3::1", replicaID("3", 1))
	require.Equal(t, "3", PhysicalID("3::1"))
	require.Equal(t, "3", PhysicalID("3"))
	require.Equal(t, 1, replicaNumber("3::1"))
	require.Equal(t, 0, replicaNumber("3"))
	require.Equal(t, []string{"3", "1"}, physicalIDs([]string{"3::0", "1::2", "3::1"}))

	devs := []Device{{ID: "0", Index: 0, NUMANode: 0, Health: pluginapi.Healthy}, {ID: "1", Index: 1, NUMANode: 1, Health: pluginapi.Unhealthy, Reason: "r"}}
	require.Equal(t, devs, replicate(devs, 1))
	got := replicate(devs, 2)
	require.Equal(t, []Device{
		{ID: "0::0", Index: 0, NUMANode: 0, Health: pluginapi.Healthy},
		{ID: "0::1", Index: 0, NUMANode: 0, Health: pluginapi.Healthy},
		{ID: "1::0", Index: 1, NUMANode: 1, Health: pluginapi.Unhealthy, Reason: "r"},
		{ID: "1::1", Index: 1, NUMANode: 1, Health: pluginapi.Unhealthy, Reason: "r"},
	}, got)
}

// replicasOf lists the replica IDs of the given XPUs, n each.
func replicasOf(n int, xpus ...int) []string {
	var out []string
	for _, x := range xpus {
		for k := range n {
			out = append(out, fmt.Sprintf("%d::%d", x, k))
		}
	}
	return out
}

func without(ids []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return slices.Contains(drop, id) })
}

func TestPreferredReplicas(t *testing.T) {
	// P800x8 shared 4 ways: XPUs 0-3 on NUMA node 0, 4-7 on node 1.
	tree := fakeTree(t, fakehost.P800x8())
	p, _ := newPlugin(t, tree, &logtest.Recorder{}, func(c *Config) { c.Sharing = sharing.PolicyOf(names.ResourceName, sharing.Config{Replicas: 4}) })
	p.Refresh()
	require.Len(t, p.Devices(), 32)
	all := replicasOf(4, 0, 1, 2, 3, 4, 5, 6, 7)
	for _, tc := range []struct {
		description string
		available   []string
		must        []string
		size        int32
		want        []string
	}{
		{"one replica: first XPU", all, nil, 1, []string{"0::0"}},
		{"one replica: the least shared XPU", without(all, "0::0", "1::0", "1::1"), nil, 1, []string{"2::0"}},
		{"two replicas: two XPUs on one NUMA node", all, nil, 2, []string{"0::0", "1::0"}},
		{"four replicas: four XPUs", all, nil, 4, []string{"0::0", "1::0", "2::0", "3::0"}},
		{"five: the fifth XPU on the other node", all, nil, 5, []string{"0::0", "1::0", "2::0", "3::0", "4::0"}},
		{"must-include pulls its NUMA node", all, []string{"6::2"}, 2, []string{"4::0", "6::2"}},
		{"busy XPUs last within a node", without(all, "0::0", "0::1", "0::2"), nil, 2, []string{"1::0", "2::0"}},
		{"one XPU left: its replicas", replicasOf(4, 5), nil, 3, []string{"5::0", "5::1", "5::2"}},
		{"more than distinct XPUs: spread first", replicasOf(4, 2, 3), nil, 3, []string{"2::0", "2::1", "3::0"}},
		{"unknown IDs ignored", []string{"9::0", "3", "1::3"}, nil, 2, []string{"1::3"}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			resp, err := p.Whole().GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
				ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
					AvailableDeviceIDs: tc.available, MustIncludeDeviceIDs: tc.must, AllocationSize: tc.size,
				}},
			})
			require.NoError(t, err)
			require.Equal(t, tc.want, resp.ContainerResponses[0].DeviceIDs)
		})
	}
}

func TestAllocateReplicas(t *testing.T) {
	h := fakehost.P800x8()
	h.Devices[2].State = "ERROR"
	tree := fakeTree(t, h)
	for _, tc := range []struct {
		description string
		strategy    Strategy
		ids         []string
		want        *pluginapi.ContainerAllocateResponse
	}{
		{"one replica: its XPU", StrategyCDICRI, []string{"3::1"}, &pluginapi.ContainerAllocateResponse{
			CdiDevices: []*pluginapi.CDIDevice{{Name: "baidu.com/xpu=3"}},
		}},
		{"two replicas of one XPU: one name, once", StrategyCDICRI, []string{"3::1", "3::0"}, &pluginapi.ContainerAllocateResponse{
			CdiDevices: []*pluginapi.CDIDevice{{Name: "baidu.com/xpu=3"}},
		}},
		{"replicas of two XPUs", StrategyCDIAnnotations, []string{"5::0", "4::3", "5::2"}, &pluginapi.ContainerAllocateResponse{
			Annotations: map[string]string{"cdi.k8s.io/xpu-device-plugin_xpu": "baidu.com/xpu=5,baidu.com/xpu=4"},
		}},
		{"volume-mounts: one mount per XPU", StrategyVolumeMounts, []string{"7::0", "7::1", "6::3"}, &pluginapi.ContainerAllocateResponse{
			Mounts: []*pluginapi.Mount{
				{ContainerPath: xpurequest.MountDir + "/7", HostPath: xpurequest.MountSource, ReadOnly: true},
				{ContainerPath: xpurequest.MountDir + "/6", HostPath: xpurequest.MountSource, ReadOnly: true},
			},
		}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			p, _ := newPlugin(t, tree, &logtest.Recorder{}, func(c *Config) {
				c.Strategy = tc.strategy
				c.Sharing = sharing.PolicyOf(names.ResourceName, sharing.Config{Replicas: 4})
			})
			p.Refresh()
			resp, err := p.Whole().Allocate(context.Background(), &pluginapi.AllocateRequest{
				ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: tc.ids}},
			})
			require.NoError(t, err)
			got := resp.ContainerResponses[0]
			require.Equal(t, tc.want.CdiDevices, got.CdiDevices)
			require.Equal(t, tc.want.Annotations, got.Annotations)
			require.Equal(t, tc.want.Envs, got.Envs)
			require.Equal(t, tc.want.Mounts, got.Mounts)
		})
	}

	p, _ := newPlugin(t, tree, &logtest.Recorder{}, func(c *Config) { c.Sharing = sharing.PolicyOf(names.ResourceName, sharing.Config{Replicas: 4}) })
	p.Refresh()
	for _, tc := range []struct {
		ids  []string
		code codes.Code
		msg  string
	}{
		{[]string{"2::1"}, codes.FailedPrecondition, `baidu.com/xpu device "2::1" is Unhealthy: the driver reports state ERROR`},
		{[]string{"3"}, codes.InvalidArgument, `device "3" is not a device of this node`},
		{[]string{"3::4"}, codes.InvalidArgument, `device "3::4" is not a device of this node`},
		{[]string{"3::1", "3::1"}, codes.InvalidArgument, `device "3::1" is requested twice`},
	} {
		t.Run(strings.Join(tc.ids, ","), func(t *testing.T) {
			_, err := p.Whole().Allocate(context.Background(), &pluginapi.AllocateRequest{
				ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: tc.ids}},
			})
			require.Equal(t, tc.code, status.Code(err), "%v", err)
			require.Contains(t, status.Convert(err).Message(), tc.msg)
		})
	}
}

func TestFailRequestsGreaterThanOne(t *testing.T) {
	tree := fakeTree(t, fakehost.P800x8())
	c := sharing.Config{Replicas: 2, FailRequestsGreaterThanOne: true}
	p, _ := newPlugin(t, tree, &logtest.Recorder{}, func(cfg *Config) { cfg.Sharing = sharing.PolicyOf(names.ResourceName, c) })
	p.Refresh()
	resp, err := p.Whole().Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"1::0"}}},
	})
	require.NoError(t, err)
	require.Equal(t, "baidu.com/xpu=1", resp.ContainerResponses[0].CdiDevices[0].Name)
	for _, ids := range [][]string{{"1::0", "2::0"}, {"1::0", "1::1"}} {
		_, err = p.Whole().Allocate(context.Background(), &pluginapi.AllocateRequest{
			ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}},
		})
		require.Equal(t, codes.InvalidArgument, status.Code(err))
		require.Contains(t, status.Convert(err).Message(), "a container asks for 2 baidu.com/xpu: this node shares each XPU 2 ways and allows one replica per container (failRequestsGreaterThanOne); ask for 1")
	}

	// Without sharing the setting changes nothing: whole XPUs are whole.
	p, _ = newPlugin(t, tree, &logtest.Recorder{}, func(c *Config) {
		c.Sharing = sharing.PolicyOf(names.ResourceName, sharing.Config{Replicas: 1, FailRequestsGreaterThanOne: true})
	})
	p.Refresh()
	_, err = p.Whole().Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"1", "2"}}},
	})
	require.NoError(t, err)
}

// TestSharedThroughTheKubeletAPI: the kubelet's side sees the renamed
// resource, every XPU four times with its NUMA node, replicas that follow
// their XPU's health, and gets one CDI name per XPU.
func TestSharedThroughTheKubeletAPI(t *testing.T) {
	tree := fakeTree(t, fakehost.P800x8())
	log := &logtest.Recorder{}
	c, err := sharing.FromFlags(names.ResourceName, sharing.Flags{Replicas: 4, RenameByDefault: true})
	require.NoError(t, err)
	p, _ := newPlugin(t, tree, log, func(cfg *Config) { cfg.Sharing = sharing.PolicyOf(names.ResourceName, c) })
	r := start(t, p)
	ctx := ctxT(t)

	require.Equal(t, "baidu.com/xpu.shared", r.reg.Request.ResourceName)
	require.Equal(t, "xpu-baidu.com_xpu.shared.sock", r.reg.Request.Endpoint)
	devs, err := r.reg.NextDevices(ctx)
	require.NoError(t, err)
	require.Len(t, devs, 32)
	for _, d := range devs {
		require.Equal(t, pluginapi.Healthy, d.Health, d.ID)
		wantNode := int64(0)
		if PhysicalID(d.ID) >= "4" {
			wantNode = 1
		}
		require.Equal(t, []*pluginapi.NUMANode{{ID: wantNode}}, d.Topology.Nodes, "device %s", d.ID)
	}
	require.Eventually(t, func() bool {
		return log.Count("advertising 32 baidu.com/xpu.shared device(s): 8 XPU(s) shared 4 ways (time-slicing, no memory or fault isolation), 8 healthy") == 1
	}, 5*time.Second, 10*time.Millisecond, log.String())

	// Two containers of one pod, each given replicas as the kubelet would
	// after asking for its preference.
	pref, err := r.reg.Client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{AvailableDeviceIDs: replicasOf(4, 0, 1, 2, 3, 4, 5, 6, 7), AllocationSize: 2}},
	})
	require.NoError(t, err)
	require.Equal(t, []string{"0::0", "1::0"}, pref.ContainerResponses[0].DeviceIDs)
	resp, err := r.reg.Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: pref.ContainerResponses[0].DeviceIDs}, {DevicesIds: []string{"0::1", "0::2"}},
	}})
	require.NoError(t, err)
	require.Equal(t, []*pluginapi.CDIDevice{{Name: "baidu.com/xpu=0"}, {Name: "baidu.com/xpu=1"}}, resp.ContainerResponses[0].CdiDevices)
	require.Equal(t, []*pluginapi.CDIDevice{{Name: "baidu.com/xpu=0"}}, resp.ContainerResponses[1].CdiDevices)

	// xpu2 fails: its four replicas, and only those, become Unhealthy.
	state := tree.Path("/proc/xpu/dev2/state")
	require.NoError(t, os.WriteFile(state, []byte("ERROR\n"), 0o666))
	devs, err = r.reg.WaitDevices(ctx, func(d []*pluginapi.Device) bool { return health(d)["2::3"] == pluginapi.Unhealthy })
	require.NoError(t, err)
	for id, v := range health(devs) {
		want := pluginapi.Healthy
		if PhysicalID(id) == "2" {
			want = pluginapi.Unhealthy
		}
		require.Equal(t, want, v, id)
	}
	_, err = r.reg.Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"2::0"}}}})
	require.ErrorContains(t, err, `device "2::0" is Unhealthy: the driver reports state ERROR`)
}

func FuzzPreferredReplicas(f *testing.F) {
	f.Add(uint8(8), uint8(4), uint64(0xffffffff), uint8(2), uint8(3))
	f.Add(uint8(2), uint8(3), uint64(0x15), uint8(0), uint8(5))
	f.Fuzz(func(t *testing.T, nXPU, nRep uint8, availMask uint64, mustIdx, size uint8) {
		nx, nr := int(nXPU%8)+1, int(nRep%8)+1
		var xpus []Device
		for i := range nx {
			xpus = append(xpus, Device{ID: fmt.Sprint(i), Index: i, NUMANode: i / 4})
		}
		devs := replicate(xpus, nr)
		var avail []string
		for i, d := range devs {
			if availMask&(1<<(i%64)) != 0 {
				avail = append(avail, d.ID)
			}
		}
		var must []string
		if len(avail) > 0 && mustIdx%2 == 1 {
			must = []string{avail[int(mustIdx)%len(avail)]}
		}
		got := preferredReplicas(devs, avail, must, int(size%10))
		want := min(int(size%10), len(avail))
		require.Len(t, got, want)
		seen := map[string]bool{}
		distinct := map[string]bool{}
		for _, id := range got {
			require.Contains(t, avail, id)
			require.False(t, seen[id], "%s twice", id)
			seen[id] = true
			distinct[PhysicalID(id)] = true
		}
		for _, id := range must {
			if want > 0 {
				require.Contains(t, got, id)
			}
		}
		// As many distinct XPUs as the available replicas allow.
		availXPUs := map[string]bool{}
		for _, id := range avail {
			availXPUs[PhysicalID(id)] = true
		}
		require.Equal(t, min(want, len(availXPUs)), len(distinct), "got %v from %v", got, avail)
	})
}
