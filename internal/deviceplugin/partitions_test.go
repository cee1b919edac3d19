package deviceplugin

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/xpu-cdi/xpu-cdi/internal/deviceplugin/kubelettest"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

type kubeletPlugin = kubelettest.Plugin

// idsOfResource returns the IDs a resource advertises.
func idsOfResource(r *Resource) []string {
	var out []string
	for _, d := range r.Devices() {
		out = append(out, d.ID)
	}
	return out
}

// resourcesOf returns advertised name -> IDs of every resource of p.
func resourcesOf(p *Plugin) map[string][]string {
	out := map[string][]string{}
	for _, r := range p.Resources() {
		out[r.Name()] = idsOfResource(r)
	}
	return out
}

func TestPartitionResourceNames(t *testing.T) {
	for _, tc := range []struct {
		mib  int64
		want string
	}{
		{49152, "baidu.com/xpu-48gb"},
		{24576, "baidu.com/xpu-24gb"},
		{16384, "baidu.com/xpu-16gb"},
		{8192, "baidu.com/xpu-8gb"},
		{5120, "baidu.com/xpu-5gb"},
	} {
		got := names.PartitionResource(names.ResourceName, tc.mib)
		require.Equal(t, tc.want, got)
		require.NoError(t, ValidateResourceName(got))
		require.True(t, names.IsPartitionResource(names.ResourceName, got), "the sharing configuration takes %s", got)
	}
	require.Equal(t, "kunlunxin.com/xpu-24gb", names.PartitionResource("kunlunxin.com/xpu", 24576))

	for _, s := range []string{"mixed", "single"} {
		got, err := ParsePartitionStrategy(s)
		require.NoError(t, err)
		require.Equal(t, PartitionStrategy(s), got)
	}
	_, err := ParsePartitionStrategy("none")
	require.ErrorContains(t, err, `unknown partition strategy "none": use mixed`)
	_, err = New(Config{PartitionStrategy: "MIG"})
	require.ErrorContains(t, err, `unknown partition strategy "MIG"`)
}

// The mixed strategy (the default) on every shape with partitions: whole
// cards as baidu.com/xpu, each size as its own resource; a host without
// partitions is the one resource of before.
func TestMixedResources(t *testing.T) {
	for _, tc := range []struct {
		description string
		host        fakehost.Host
		want        map[string][]string
	}{
		{"p800-sriov: two halves and a whole card", fakehost.P800SRIOV(), map[string][]string{
			"baidu.com/xpu": {"3"}, "baidu.com/xpu-48gb": {"1", "2"},
		}},
		{"p800 quarters", fakehost.P800Quarters(), map[string][]string{
			"baidu.com/xpu": {"5"}, "baidu.com/xpu-24gb": {"1", "2", "3", "4"},
		}},
		{"r200-sriov: three VFs of 5 GiB and a whole R200", fakehost.R200SRIOV(), map[string][]string{
			"baidu.com/xpu": {"1"}, "baidu.com/xpu-5gb": {"2", "3", "4"},
		}},
		{"p800x8: no partitions, one resource as before", fakehost.P800x8(), map[string][]string{
			"baidu.com/xpu": {"0", "1", "2", "3", "4", "5", "6", "7"},
		}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			p, _ := newPlugin(t, fakeTree(t, tc.host), &logtest.Recorder{})
			require.True(t, p.Refresh())
			require.Equal(t, tc.want, resourcesOf(p))
			for _, r := range p.Resources() {
				for _, d := range r.Devices() {
					require.Equal(t, pluginapi.Healthy, d.Health, "%s %s", r.Name(), d.ID)
				}
			}
		})
	}
}

// Under single every device is baidu.com/xpu when all are of one size;
// otherwise Run refuses to start and names the sizes and the devices.
func TestSingleStrategy(t *testing.T) {
	halvesOnly := fakehost.P800SRIOV()
	halvesOnly.Devices = halvesOnly.Devices[:3]
	single := func(c *Config) { c.PartitionStrategy = PartitionSingle }

	t.Run("one size: every device as the resource", func(t *testing.T) {
		p, _ := newPlugin(t, fakeTree(t, halvesOnly), &logtest.Recorder{}, single)
		p.Refresh()
		require.Equal(t, map[string][]string{"baidu.com/xpu": {"1", "2"}}, resourcesOf(p))
	})
	t.Run("whole cards only: as before", func(t *testing.T) {
		p, _ := newPlugin(t, fakeTree(t, fakehost.P800x8()), &logtest.Recorder{}, single)
		p.Refresh()
		require.Len(t, p.Devices(), 8)
	})
	for _, tc := range []struct {
		host fakehost.Host
		want string
	}{
		{fakehost.P800SRIOV(), "this node has 96gb: XPU 3 (whole card); 48gb: XPU 1, 2 (partitions of 0000:03:00.0)"},
		{fakehost.P800Quarters(), "this node has 96gb: XPU 5 (whole card); 24gb: XPU 1, 2, 3, 4 (partitions of 0000:03:00.0)"},
	} {
		t.Run("several sizes: refused", func(t *testing.T) {
			p, _ := newPlugin(t, fakeTree(t, tc.host), &logtest.Recorder{}, single)
			err := p.Run(context.Background())
			require.ErrorContains(t, err, "--partition-strategy single advertises every XPU as baidu.com/xpu and needs them all of one size, but "+tc.want)
			require.ErrorContains(t, err, "lay every card out alike (xpu-cdi partition apply --layout all=N) or use --partition-strategy mixed")
			require.NoFileExists(t, p.SocketPath(), "nothing served")
		})
	}

	t.Run("a layout change at run time: the other size is Unhealthy until all agree", func(t *testing.T) {
		var mu sync.Mutex
		trees := map[string]*fakehost.Tree{"halves": fakeTree(t, halvesOnly), "mixed": fakeTree(t, fakehost.P800SRIOV())}
		current := "halves"
		log := &logtest.Recorder{}
		p, err := New(Config{PartitionStrategy: PartitionSingle, Strategy: StrategyVolumeMounts, Log: log, Discover: func() (*discover.Host, error) {
			mu.Lock()
			defer mu.Unlock()
			return discover.Discover(trees[current].DiscoverOptions()...)
		}})
		require.NoError(t, err)
		p.Refresh()
		require.Equal(t, []string{"1", "2"}, idsOfResource(p.Whole()))
		mu.Lock()
		current = "mixed"
		mu.Unlock()
		require.True(t, p.Refresh())
		got := map[string]string{}
		for _, d := range p.Devices() {
			got[d.ID] = d.Health
		}
		require.Equal(t, map[string]string{"1": pluginapi.Healthy, "2": pluginapi.Healthy, "3": pluginapi.Unhealthy}, got)
		require.Contains(t, p.Devices()[2].Reason, "--partition-strategy single advertises XPUs of 48gb only")
		require.Contains(t, log.String(), "error: --partition-strategy single: the XPUs are no longer of one size")
	})
}

// TestLayoutChangeThroughTheKubelet: a P800 card goes from two halves to
// four quarters while the plugin runs (the plugin rescans every health
// interval). The 48gb resource empties and stays registered, the 24gb
// resource registers when its VFs appear, the whole card's stream goes on;
// each resource allocates only its own devices.
func TestLayoutChangeThroughTheKubelet(t *testing.T) {
	halves, quarters := fakeTree(t, fakehost.P800SRIOV()), fakeTree(t, fakehost.P800Quarters())
	specDir := t.TempDir()
	fakehosttest.WriteSpec(t, halves, specDir)
	var mu sync.Mutex
	tree := halves
	log := &logtest.Recorder{}
	p, err := New(Config{
		PluginDir: shortDir(t), Log: log, HealthInterval: 30 * time.Millisecond, WatchInterval: 20 * time.Millisecond,
		SpecDirs: []string{specDir},
		Discover: func() (*discover.Host, error) {
			mu.Lock()
			defer mu.Unlock()
			return discover.Discover(tree.DiscoverOptions()...)
		},
	})
	require.NoError(t, err)
	r := start(t, p)
	ctx := ctxT(t)
	regs := map[string]*kubeletPlugin{r.reg.Request.ResourceName: r.reg}
	second, err := r.kubelet.WaitRegistration(ctx)
	require.NoError(t, err)
	regs[second.Request.ResourceName] = second
	require.Contains(t, regs, "baidu.com/xpu")
	require.Contains(t, regs, "baidu.com/xpu-48gb")
	devs, err := regs["baidu.com/xpu-48gb"].WaitDevices(ctx, func(d []*pluginapi.Device) bool { return len(d) == 2 })
	require.NoError(t, err)
	require.Equal(t, map[string]string{"1": pluginapi.Healthy, "2": pluginapi.Healthy}, health(devs))
	devs, err = regs["baidu.com/xpu"].WaitDevices(ctx, func(d []*pluginapi.Device) bool { return len(d) == 1 })
	require.NoError(t, err)
	require.Equal(t, map[string]string{"3": pluginapi.Healthy}, health(devs))

	// The card is re-laid out, and xpu-cdi partition apply rewrites the spec.
	mu.Lock()
	tree = quarters
	mu.Unlock()
	fakehosttest.WriteSpec(t, quarters, specDir)

	q, err := r.kubelet.WaitRegistration(ctx)
	require.NoError(t, err)
	require.Equal(t, "baidu.com/xpu-24gb", q.Request.ResourceName)
	devs, err = q.WaitDevices(ctx, func(d []*pluginapi.Device) bool {
		return len(d) == 4 && health(d)["4"] == pluginapi.Healthy
	})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"1": pluginapi.Healthy, "2": pluginapi.Healthy, "3": pluginapi.Healthy, "4": pluginapi.Healthy}, health(devs))
	_, err = regs["baidu.com/xpu-48gb"].WaitDevices(ctx, func(d []*pluginapi.Device) bool { return len(d) == 0 })
	require.NoError(t, err)
	devs, err = regs["baidu.com/xpu"].WaitDevices(ctx, func(d []*pluginapi.Device) bool { return health(d)["5"] == pluginapi.Healthy })
	require.NoError(t, err)
	require.Len(t, devs, 1)

	resp, err := q.Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"3"}}}})
	require.NoError(t, err)
	require.Equal(t, []*pluginapi.CDIDevice{{Name: "baidu.com/xpu=3"}}, resp.ContainerResponses[0].CdiDevices)
	_, err = regs["baidu.com/xpu-48gb"].Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"1"}}}})
	require.ErrorContains(t, err, `baidu.com/xpu-48gb device "1" is not a device of this node (advertised: none)`)
	_, err = regs["baidu.com/xpu"].Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"1"}}}})
	require.ErrorContains(t, err, `baidu.com/xpu device "1" is not a device of this node (advertised: 5)`)

	pref, err := q.Client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: []string{"5", "4", "2"}, AllocationSize: 2},
	}})
	require.NoError(t, err)
	require.Equal(t, []string{"2", "4"}, pref.ContainerResponses[0].DeviceIDs, "only this resource's devices")

	for name, reg := range regs {
		select {
		case <-reg.Ended():
			t.Fatalf("the stream of %s ended: nothing restarts", name)
		default:
		}
	}
	require.Equal(t, 1, log.Count("registered baidu.com/xpu-48gb with the kubelet"), log.String())
	require.Equal(t, 1, log.Count("registered baidu.com/xpu with the kubelet"), log.String())
	require.Eventually(t, func() bool { return p.Ready() == nil }, 5*time.Second, 10*time.Millisecond)
}

// Time-slicing per resource: the file shares the 48gb partitions and not
// the whole card; renameByDefault names the shared resource
// baidu.com/xpu-48gb.shared. The flags share every resource alike.
func TestSharingPerResource(t *testing.T) {
	policy, err := sharing.ParsePolicy([]byte(`
version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
    - name: baidu.com/xpu-48gb
      replicas: 2
`), names.ResourceName)
	require.NoError(t, err)
	tree := fakeTree(t, fakehost.P800SRIOV())
	p, _ := newPlugin(t, tree, &logtest.Recorder{}, func(c *Config) { c.Sharing = policy })
	r := start(t, p)
	ctx := ctxT(t)
	regs := map[string]*kubeletPlugin{r.reg.Request.ResourceName: r.reg}
	second, err := r.kubelet.WaitRegistration(ctx)
	require.NoError(t, err)
	regs[second.Request.ResourceName] = second
	require.Contains(t, regs, "baidu.com/xpu")
	shared := regs["baidu.com/xpu-48gb.shared"]
	require.NotNil(t, shared, "registered: %v", regs)
	require.Equal(t, "xpu-baidu.com_xpu-48gb.shared.sock", shared.Request.Endpoint)
	devs, err := shared.WaitDevices(ctx, func(d []*pluginapi.Device) bool { return len(d) == 4 })
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"1::0", "1::1", "2::0", "2::1"}, keys(health(devs)))
	devs, err = regs["baidu.com/xpu"].WaitDevices(ctx, func(d []*pluginapi.Device) bool { return len(d) == 1 })
	require.NoError(t, err)
	require.Equal(t, map[string]string{"3": pluginapi.Healthy}, health(devs), "the whole card is not shared")
	pref, err := shared.Client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: []string{"1::0", "1::1", "2::1"}, AllocationSize: 2},
	}})
	require.NoError(t, err)
	require.Equal(t, []string{"1::0", "2::1"}, pref.ContainerResponses[0].DeviceIDs, "distinct partitions first")
	resp, err := shared.Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"2::1"}}}})
	require.NoError(t, err)
	require.Equal(t, []*pluginapi.CDIDevice{{Name: "baidu.com/xpu=2"}}, resp.ContainerResponses[0].CdiDevices)

	t.Run("flags: every resource", func(t *testing.T) {
		all, err := sharing.PolicyFromFlags(names.ResourceName, sharing.Flags{Replicas: 3, RenameByDefault: true})
		require.NoError(t, err)
		p, _ := newPlugin(t, fakeTree(t, fakehost.R200SRIOV()), &logtest.Recorder{}, func(c *Config) { c.Sharing = all })
		p.Refresh()
		got := map[string]int{}
		for _, r := range p.Resources() {
			got[r.Name()] = len(r.Devices())
		}
		require.Equal(t, map[string]int{"baidu.com/xpu.shared": 3, "baidu.com/xpu-5gb.shared": 9}, got)
	})
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
