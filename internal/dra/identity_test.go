package dra

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// A layout applied between the allocation and Prepare renumbers the VFs:
// on p800-sriov xpu-1 is a half of card 0 (48Gi) and xpu-3 the whole
// second card; laid out in quarters, xpu-1 is a quarter (24Gi) and xpu-3
// another quarter of card 0. Prepare refuses what the slice no longer
// offers under the name, before and after the refresh that publishes the
// new layout; a claim allocated from the new slice is prepared.
func TestPrepareRefusesARenumberedDevice(t *testing.T) {
	f := newFixture(t, fakehost.P800SRIOV())
	quarters := fakehosttest.Build(t, fakehost.P800Quarters())
	fakehosttest.WriteSpec(t, quarters, f.specDir)
	var now atomic.Pointer[fakehost.Tree]
	now.Store(f.tree)
	f.d = f.driver(t, func(c *Config) {
		c.Discover = func() (*discover.Host, error) { return discover.Discover(now.Load().DiscoverOptions()...) }
	})
	k := startKubelet(t, f.d)
	require.True(t, f.d.Refresh())
	allocated := metav1.NewTime(testClock().Add(-time.Minute))
	half, whole := claim("half", "xpu-1"), claim("whole", "xpu-3")
	for _, c := range []*resourceapi.ResourceClaim{half, whole} {
		c.Status.Allocation.AllocationTimestamp = &allocated
		k.create(t, c)
	}

	now.Store(quarters) // the layout all=4, applied after the allocation
	r := k.prepare(t, half)
	require.Contains(t, r.GetError(), "device xpu-1: the device is not the one the claim was allocated: the slice offers PCI 0000:03:00.1, a partition of 0000:03:00.0, 48Gi under this name, the node has PCI 0000:03:00.1, a partition of 0000:03:00.0, 24Gi now")
	r = k.prepare(t, whole)
	require.Contains(t, r.GetError(), "device xpu-3: the device is not the one the claim was allocated: the slice offers PCI 0000:83:00.0, a whole card, 96Gi")
	require.Empty(t, f.records(t), "nothing prepared")
	require.ErrorIs(t, f.d.checkIdentity("xpu-1", apiDevice(f.d.scanner.Scan().Devices[0]), half.Status.Allocation), ErrDeviceChanged)

	// The slice now offers the quarters: a claim allocated before still
	// refers to the old xpu-1, one allocated after (or without a time) is
	// prepared.
	require.True(t, f.d.Refresh())
	r = k.prepare(t, half)
	require.Contains(t, r.GetError(), "device xpu-1: the device is not the one the claim was allocated: allocated at 2026-12-01T07:59:00Z, but the name stands for PCI 0000:03:00.1, a partition of 0000:03:00.0, 24Gi since 2026-12-01T08:00:00Z")
	later := claim("later", "xpu-1")
	after := metav1.NewTime(testClock().Add(time.Minute))
	later.Status.Allocation.AllocationTimestamp = &after
	k.create(t, later)
	r = k.prepare(t, later)
	require.Empty(t, r.GetError())
	require.Equal(t, []string{"baidu.com/xpu=1"}, cdiIDs(r))
	untimed := claim("untimed", "xpu-2")
	k.create(t, untimed)
	r = k.prepare(t, untimed)
	require.Empty(t, r.GetError())
}
