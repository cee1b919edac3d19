package dra

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/labels"
)

// The node labels and the slice's attributes tell the same facts of every
// fake host: both come from discover.Host.FactsOf. Where all devices agree,
// the label is the attribute's value; a label that is left out has no
// common attribute value.
func TestLabelsAgreeWithAttributes(t *testing.T) {
	str := func(a resourceapi.DeviceAttribute, ok bool) string {
		switch {
		case !ok:
			return ""
		case a.StringValue != nil:
			return *a.StringValue
		}
		return ""
	}
	forEachShape(t, func(t *testing.T, _ string, f *fixture) {
		host, err := discoverTree(f.tree)()
		require.NoError(t, err)
		got := map[string]string{}
		for _, l := range labels.For(host, "", nil) {
			got[l.Key] = l.Value
		}
		// common is the one value of the devices, "" when any lacks it
		// or they disagree.
		common := func(value func(resourceapi.Device) string) string {
			v := ""
			for i, d := range f.d.Slices()[0].Spec.Devices {
				x := value(d)
				if x == "" || i > 0 && x != v {
					return ""
				}
				v = x
			}
			return v
		}
		attr := func(name string) func(resourceapi.Device) string {
			return func(d resourceapi.Device) string {
				a, ok := d.Attributes[resourceapi.QualifiedName(name)]
				return str(a, ok)
			}
		}
		memory := common(func(d resourceapi.Device) string {
			c, ok := d.Capacity[CapacityMemory]
			if !ok {
				return ""
			}
			q := c.Value
			return strconv.FormatInt(q.Value()>>20, 10)
		})
		for _, tc := range []struct{ label, want string }{
			{labels.Family, common(attr(AttrFamily))},
			{labels.DriverVersion, common(attr(AttrDriverVersion + "Full"))},
			{labels.XREVersion, common(attr(AttrXREVersion + "Full"))},
			{labels.Memory, memory},
		} {
			require.Equal(t, tc.want, got[tc.label], "%s", tc.label)
		}
	})
}

// A P800 VF on a driver 5.x host: its family is Kunlun3 in the slice as in
// the node's label, and its memory half the card's.
func TestP800VFFacts(t *testing.T) {
	f := newFixture(t, fakehost.P800SRIOV())
	f.d.Refresh()
	devs := f.d.Slices()[0].Spec.Devices
	require.Len(t, devs, 3, "the PF with VFs enabled is not offered")
	vf := devs[0]
	require.Equal(t, "xpu-1", vf.Name)
	require.Equal(t, "P800 VF", *vf.Attributes[AttrModel].StringValue)
	require.Equal(t, "Kunlun3", *vf.Attributes[AttrFamily].StringValue)
	mem := vf.Capacity[CapacityMemory].Value
	require.Equal(t, int64(48<<30), mem.Value())

	host, err := discoverTree(f.tree)()
	require.NoError(t, err)
	require.Contains(t, labels.For(host, "", nil), labels.Label{Key: labels.Family, Value: "Kunlun3"})
	require.Contains(t, labels.For(host, "", nil), labels.Label{Key: labels.Model, Value: "P800"})
}
