package dra

import (
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

// Each partition (VF) is a device with its size as capacity memory, the
// fraction of its card as attribute partition and its PF's address; the PF
// of a cut card is not offered, a whole card has no partition attribute.
func TestPartitionDevices(t *testing.T) {
	type want struct {
		name, partition, parent string
		memory                  string
	}
	for _, tc := range []struct {
		shape string
		host  fakehost.Host
		want  []want
	}{
		{"p800-sriov", fakehost.P800SRIOV(), []want{
			{"xpu-1", "1/2", "0000:03:00.0", "48Gi"},
			{"xpu-2", "1/2", "0000:03:00.0", "48Gi"},
			{"xpu-3", "", "", "96Gi"},
		}},
		{"p800 quarters", fakehost.P800Quarters(), []want{
			{"xpu-1", "1/4", "0000:03:00.0", "24Gi"},
			{"xpu-2", "1/4", "0000:03:00.0", "24Gi"},
			{"xpu-3", "1/4", "0000:03:00.0", "24Gi"},
			{"xpu-4", "1/4", "0000:03:00.0", "24Gi"},
			{"xpu-5", "", "", "96Gi"},
		}},
		{"r200-sriov", fakehost.R200SRIOV(), []want{
			{"xpu-2", "1/3", "0000:3b:00.0", "5Gi"},
			{"xpu-3", "1/3", "0000:3b:00.0", "5Gi"},
			{"xpu-4", "1/3", "0000:3b:00.0", "5Gi"},
			{"xpu-1", "", "", ""},
		}},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			f := newFixture(t, tc.host)
			f.d.Refresh()
			devs := f.d.Slices()[0].Spec.Devices
			require.Len(t, devs, len(tc.want), "the PF of a cut card is not offered")
			for i, w := range tc.want {
				d := devs[i]
				require.Equal(t, w.name, d.Name)
				attr := func(name string) string {
					if a, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok {
						return *a.StringValue
					}
					return ""
				}
				require.Equal(t, w.partition, attr(AttrPartition), d.Name)
				require.Equal(t, w.parent, attr(AttrParentBusID), d.Name)
				if w.memory == "" {
					// The whole R200 of the fake host tells no memory.
					if c, ok := d.Capacity[CapacityMemory]; ok {
						require.NotEqual(t, "5Gi", c.Value.String(), d.Name)
					}
					continue
				}
				got := d.Capacity[CapacityMemory].Value
				require.Zero(t, got.Cmp(resource.MustParse(w.memory)), "%s: memory %s, want %s", d.Name, got.String(), w.memory)
			}
		})
	}
}

// The selector of the docs, "an XPU with at least 40Gi", compares the
// memory capacity: on p800-sriov the halves (48Gi) and the whole card
// qualify, on the quarters layout only the whole card.
func TestMemorySelectorQuantities(t *testing.T) {
	atLeast := resource.MustParse("40Gi")
	for _, tc := range []struct {
		host fakehost.Host
		want []string
	}{
		{fakehost.P800SRIOV(), []string{"xpu-1", "xpu-2", "xpu-3"}},
		{fakehost.P800Quarters(), []string{"xpu-5"}},
	} {
		f := newFixture(t, tc.host)
		f.d.Refresh()
		var got []string
		for _, d := range f.d.Slices()[0].Spec.Devices {
			c := d.Capacity[CapacityMemory].Value
			if c.Cmp(atLeast) >= 0 {
				got = append(got, d.Name)
			}
		}
		require.Equal(t, tc.want, got)
	}
}
