package dra

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

// The kubelet's health stream gets every device, then a new report when a
// device goes into an error state, and ends with the context.
func TestWatchHealthStatus(t *testing.T) {
	f := newFixture(t, fakehost.P800x8(), func(c *Config) { c.PollInterval = time.Hour })
	f.d.Refresh()
	ctx, cancel := context.WithCancel(context.Background())
	reports := make(chan kubeletplugin.DeviceHealthReport)
	done := make(chan error, 1)
	go func() { done <- f.d.WatchHealthStatus(ctx, reports) }()
	next := func() kubeletplugin.DeviceHealthReport {
		select {
		case r := <-reports:
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("no health report in 5s")
		}
		return kubeletplugin.DeviceHealthReport{}
	}
	r := next()
	require.Len(t, r.Devices, 8)
	for _, d := range r.Devices {
		require.Equal(t, kubeletplugin.HealthStatusHealthy, d.Health, d.DeviceName)
		require.Equal(t, "node-1", d.PoolName)
		require.Equal(t, 3*time.Hour, d.HealthCheckTimeout)
	}
	f.setState(t, 2, "IN_RESET")
	require.True(t, f.d.Refresh())
	r = next()
	require.Equal(t, "xpu-2", r.Devices[2].DeviceName)
	require.Equal(t, kubeletplugin.HealthStatusUnhealthy, r.Devices[2].Health)
	require.Equal(t, "the driver reports state IN_RESET", r.Devices[2].Message)
	require.Equal(t, kubeletplugin.HealthStatusHealthy, r.Devices[3].Health)
	cancel()
	require.NoError(t, <-done)
}
