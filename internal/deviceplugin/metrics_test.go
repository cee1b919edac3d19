package deviceplugin

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	xputestutil "github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// TestMetricsThroughTheKubelet: Allocate calls of the test kubelet are
// counted, the refused ones by cause; the latency histogram sees each; a
// device that turns Unhealthy and back is two health changes; the
// registration is counted; the metrics pass the linter.
func TestMetricsThroughTheKubelet(t *testing.T) {
	tree := fakeTree(t, fakehost.P800x8())
	reg := prometheus.NewRegistry()
	p, _ := newPlugin(t, tree, &logtest.Recorder{}, func(c *Config) { c.Metrics = reg })
	r := start(t, p)
	ctx := ctxT(t)
	_, err := r.reg.NextDevices(ctx)
	require.NoError(t, err)
	allocate := func(ids ...string) error {
		_, err := r.reg.Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
		return err
	}
	const res = "baidu.com/xpu"

	require.NoError(t, allocate("1", "2"))
	require.NoError(t, allocate("3"))
	require.Equal(t, 2.0, testutil.ToFloat64(p.m.allocations.WithLabelValues(res)))
	require.Equal(t, 3.0, testutil.ToFloat64(p.m.allocated.WithLabelValues(res)))

	err = allocate("9")
	require.Equal(t, codes.InvalidArgument, status.Code(err), "the kubelet gets the status of before")
	require.Contains(t, status.Convert(err).Message(), `baidu.com/xpu device "9" is not a device of this node`)
	require.Error(t, allocate("4", "4"))
	require.Equal(t, 1.0, testutil.ToFloat64(p.m.allocErrors.WithLabelValues(res, "unknown_device")))
	require.Equal(t, 1.0, testutil.ToFloat64(p.m.allocErrors.WithLabelValues(res, "duplicate_device")))

	// xpu2 fails, then comes back: two health changes, and an Allocate of
	// it meanwhile is refused as unhealthy.
	state := tree.Path("/proc/xpu/dev2/state")
	require.NoError(t, os.WriteFile(state, []byte("ERROR\n"), 0o666))
	_, err = r.reg.WaitDevices(ctx, func(d []*pluginapi.Device) bool { return health(d)["2"] == pluginapi.Unhealthy })
	require.NoError(t, err)
	err = allocate("2")
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Equal(t, 1.0, testutil.ToFloat64(p.m.allocErrors.WithLabelValues(res, "unhealthy_device")))
	require.Equal(t, 1.0, testutil.ToFloat64(p.m.HealthChanges.WithLabelValues("Unhealthy")))
	require.NoError(t, os.WriteFile(state, []byte("RUNNING\n"), 0o666))
	_, err = r.reg.WaitDevices(ctx, func(d []*pluginapi.Device) bool { return health(d)["2"] == pluginapi.Healthy })
	require.NoError(t, err)
	require.Equal(t, 1.0, testutil.ToFloat64(p.m.HealthChanges.WithLabelValues("Healthy")))

	require.Equal(t, uint64(5), xputestutil.HistogramCount(t, reg, "xpu_device_plugin_allocate_duration_seconds", "resource", res), "every call, refused ones too")
	require.Equal(t, 1.0, testutil.ToFloat64(p.m.registrations.WithLabelValues(res)))
	require.Equal(t, 0.0, testutil.ToFloat64(p.m.Relayouts), "a health change is not a re-layout")
	require.Equal(t, 3, testutil.CollectAndCount(p.m.allocErrors), "one series per cause seen, no device ID in a label")

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
}

// TestMetricsAllocateCauses: every refusal of Allocate is counted under
// its cause, derived from the error (errors.Is), and the names are a
// fixed set.
func TestMetricsAllocateCauses(t *testing.T) {
	tree := fakeTree(t, fakehost.P800x8())
	reg := prometheus.NewRegistry()
	p, _ := newPlugin(t, tree, &logtest.Recorder{}, func(c *Config) {
		c.Metrics = reg
		c.Sharing = sharing.PolicyOf(names.ResourceName, sharing.Config{Replicas: 2, FailRequestsGreaterThanOne: true})
	})
	p.Refresh()
	_, err := p.Whole().Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"1::0", "2::0"}}},
	})
	require.ErrorIs(t, err, ErrReplicasPerContainer)
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Equal(t, 1.0, testutil.ToFloat64(p.m.allocErrors.WithLabelValues("baidu.com/xpu", "replicas_per_container")))

	for _, tc := range []struct {
		err  error
		want string
	}{
		{ErrReplicasPerContainer, "replicas_per_container"},
		{ErrDuplicateDevice, "duplicate_device"},
		{ErrUnknownDevice, "unknown_device"},
		{ErrDeviceUnhealthy, "unhealthy_device"},
		{&allocError{cause: ErrUnknownDevice, st: status.New(codes.InvalidArgument, "x")}, "unknown_device"},
		{errors.New("writing the answer"), "internal"},
	} {
		require.Equal(t, tc.want, allocCause(tc.err), tc.err.Error())
	}
}

// TestMetricsRelayout: a card cut from halves into quarters while the
// plugin runs is one re-layout; reading the same layout again is none.
func TestMetricsRelayout(t *testing.T) {
	halves, quarters := fakeTree(t, fakehost.P800SRIOV()), fakeTree(t, fakehost.P800Quarters())
	specDir := t.TempDir()
	fakehosttest.WriteSpec(t, halves, specDir)
	var mu sync.Mutex
	tree := halves
	reg := prometheus.NewRegistry()
	p, err := New(Config{
		PluginDir: shortDir(t), SpecDirs: []string{specDir}, Metrics: reg,
		Discover: func() (*discover.Host, error) {
			mu.Lock()
			defer mu.Unlock()
			return discover.Discover(tree.DiscoverOptions()...)
		},
	})
	require.NoError(t, err)
	p.Refresh()
	p.Refresh()
	require.Equal(t, 0.0, testutil.ToFloat64(p.m.Relayouts))
	mu.Lock()
	tree = quarters
	mu.Unlock()
	fakehosttest.WriteSpec(t, quarters, specDir)
	p.Refresh()
	p.Refresh()
	require.Equal(t, 1.0, testutil.ToFloat64(p.m.Relayouts))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP xpu_device_plugin_relayouts_total Changes of the node's XPUs the plugin observed (a partition layout applied, a card cut or put back whole, a function gone or back); the plugin then advertises, and registers, what the node has.
# TYPE xpu_device_plugin_relayouts_total counter
xpu_device_plugin_relayouts_total 1
`), "xpu_device_plugin_relayouts_total"))
}

// TestMetricsRegisteredOnce: a second plugin on the same registry is an
// error naming the metrics, not a panic.
func TestMetricsRegisteredOnce(t *testing.T) {
	tree := fakeTree(t, fakehost.P800x8())
	reg := prometheus.NewRegistry()
	newPlugin(t, tree, &logtest.Recorder{}, func(c *Config) { c.Metrics = reg })
	_, err := New(Config{Discover: discoverTree(tree), Metrics: reg})
	require.ErrorContains(t, err, "registering the device plugin's metrics")
}
