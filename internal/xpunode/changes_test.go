package xpunode

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func TestChangeTracker(t *testing.T) {
	dev := func(id, health string, mib int64) Device {
		return Device{ID: id, Health: health, Facts: discover.Facts{Model: "P800", MemoryMiB: mib}}
	}
	var tr ChangeTracker
	require.Equal(t, Changes{}, tr.Observe([]Device{dev("0", Healthy, 98304), dev("1", Healthy, 98304)}), "the first scan is the baseline")
	require.Equal(t, Changes{}, tr.Observe([]Device{dev("1", Healthy, 98304), dev("0", Healthy, 98304)}), "the same devices in another order")
	require.Equal(t, Changes{ToUnhealthy: 1}, tr.Observe([]Device{dev("0", Unhealthy, 98304), dev("1", Healthy, 98304)}))
	require.Equal(t, Changes{ToHealthy: 1}, tr.Observe([]Device{dev("0", Healthy, 98304), dev("1", Healthy, 98304)}))
	require.Equal(t, Changes{Relayout: true}, tr.Observe([]Device{dev("0", Healthy, 98304), dev("2", Healthy, 24576), dev("3", Unhealthy, 24576)}),
		"card 1 cut into two partitions: a new layout; a new device's health is not a change")
	require.Equal(t, Changes{ToHealthy: 1, Relayout: true}, tr.Observe([]Device{dev("0", Healthy, 98304), dev("2", Healthy, 49152), dev("3", Healthy, 49152)}),
		"the same functions with another size are a new layout (and 3 is healthy again)")
}
