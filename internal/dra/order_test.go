package dra

import (
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

// memoryOf is d's memory capacity, nil without one.
func memoryOf(d resourceapi.Device) *resource.Quantity {
	c, ok := d.Capacity[CapacityMemory]
	if !ok {
		return nil
	}
	return &c.Value
}

// The scheduler takes the first matching device in the pool's order, so
// the driver lists the smallest devices first (order.go).
func TestBestFitOrder(t *testing.T) {
	t.Run("dynamic: quarters, then halves, then whole cards, each by card then slot", func(t *testing.T) {
		f := newFixture(t, fakehost.P800x8SRIOV(), dynamicMode)
		require.True(t, f.d.Refresh())
		s := f.d.Slices()
		checkSliceLimits(t, s)
		var want []string
		for _, n := range []int{4, 2} {
			for card := range 8 {
				for slot := range n {
					want = append(want, SlotName(card, n, slot))
				}
			}
		}
		for card := range 8 {
			want = append(want, CardName(card))
		}
		require.Equal(t, want, publishedNames(s))
		first := deviceByName(t, s, "xpu-0-q0")
		require.Equal(t, "24Gi", memoryOf(first).String())
	})
	t.Run("static, a mixed layout: VFs by memory before whole cards, by index within a size", func(t *testing.T) {
		// Two whole cards, then one in halves and one in quarters: the
		// whole cards have the lowest /dev/xpuN.
		h, err := fakehost.P800x8SRIOV().WithCardVFs([]int{0, 0, 2, 4, 0, 0, 0, 0})
		require.NoError(t, err)
		f := newFixture(t, h)
		require.True(t, f.d.Refresh())
		s := f.d.Slices()
		require.Len(t, s, 1)
		devs := s[0].Spec.Devices
		require.Len(t, devs, 6+2+4)
		var sizes []string
		for i, d := range devs {
			sizes = append(sizes, memoryOf(d).String())
			if i > 0 && memoryOf(devs[i-1]).Cmp(*memoryOf(d)) == 0 {
				require.Less(t, *devs[i-1].Attributes[AttrIndex].IntValue, *d.Attributes[AttrIndex].IntValue, "%s before %s", devs[i-1].Name, d.Name)
			}
		}
		require.Equal(t, []string{"24Gi", "24Gi", "24Gi", "24Gi", "48Gi", "48Gi", "96Gi", "96Gi", "96Gi", "96Gi", "96Gi", "96Gi"}, sizes)
		for _, d := range devs[:6] {
			require.Equal(t, "vf", *d.Attributes[AttrSRIOVRole].StringValue, d.Name)
		}
	})
	t.Run("a device whose memory is unknown comes last, equal ones keep their order", func(t *testing.T) {
		dev := func(name, mem string) resourceapi.Device {
			d := resourceapi.Device{Name: name}
			if mem != "" {
				d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{CapacityMemory: {Value: resource.MustParse(mem)}}
			}
			return d
		}
		devs := []resourceapi.Device{dev("a", ""), dev("b", "96Gi"), dev("c", "24Gi"), dev("d", ""), dev("e", "24Gi"), dev("f", "48Gi")}
		bestFitOrder(devs)
		var got []string
		for _, d := range devs {
			got = append(got, d.Name)
		}
		require.Equal(t, []string{"c", "e", "f", "b", "a", "d"}, got)
	})
}
