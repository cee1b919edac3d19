package dra

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
)

func dynamicMode(c *Config) { c.Partitions = PartitionsDynamic }

// checkSliceLimits fails t where slices break a limit of the API server's
// validation of ResourceSlices (k8s.io/api/resource/v1 constants; the
// validation itself lives in k8s.io/kubernetes, which the module does not
// import): one pool, each slice with devices or counter sets and not both,
// at most 8 sets a slice and 32 counters a set, at most 64 devices a slice
// when counters or taints are used, at most 2 consumptions a device and 2
// compatibility groups a consumption, DNS labels for the names, unique
// names, and every consumed counter declared in the pool.
func checkSliceLimits(t *testing.T, slices []*resourceapi.ResourceSlice) {
	t.Helper()
	sets := map[string]map[string]resourceapi.Counter{}
	devices := map[string]bool{}
	var consumed []resourceapi.DeviceCounterConsumption
	label := func(what, s string) {
		t.Helper()
		require.Empty(t, validation.IsDNS1123Label(s), "%s %q is not a DNS label", what, s)
	}
	for _, s := range slices {
		spec := s.Spec
		require.Equal(t, int64(len(slices)), spec.Pool.ResourceSliceCount, s.Name)
		require.False(t, len(spec.Devices) > 0 && len(spec.SharedCounters) > 0, "slice %s holds devices and counter sets", s.Name)
		require.LessOrEqual(t, len(spec.SharedCounters), resourceapi.ResourceSliceMaxCounterSets, s.Name)
		for _, cs := range spec.SharedCounters {
			label("counter set", cs.Name)
			require.NotContains(t, sets, cs.Name, "counter set %s declared twice", cs.Name)
			require.NotEmpty(t, cs.Counters, cs.Name)
			require.LessOrEqual(t, len(cs.Counters), resourceapi.ResourceSliceMaxCountersPerCounterSet, cs.Name)
			for name := range cs.Counters {
				label("counter", name)
			}
			sets[cs.Name] = cs.Counters
		}
		limit := resourceapi.ResourceSliceMaxDevices
		for _, d := range spec.Devices {
			if len(d.ConsumesCounters) > 0 || len(d.Taints) > 0 {
				limit = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
			}
		}
		require.LessOrEqual(t, len(spec.Devices), limit, s.Name)
		for _, d := range spec.Devices {
			label("device", d.Name)
			require.False(t, devices[d.Name], "device %s twice in the pool", d.Name)
			devices[d.Name] = true
			require.LessOrEqual(t, len(d.ConsumesCounters), resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice, d.Name)
			require.LessOrEqual(t, len(d.Attributes)+len(d.Capacity), resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice, d.Name)
			require.LessOrEqual(t, len(d.Taints), resourceapi.DeviceTaintsMaxLength, d.Name)
			for _, c := range d.ConsumesCounters {
				require.LessOrEqual(t, len(c.Counters), resourceapi.ResourceSliceMaxCountersPerDeviceCounterConsumption, d.Name)
				require.LessOrEqual(t, len(c.CompatibilityGroups), resourceapi.DeviceCompatibilityGroupsMaxSize, d.Name)
				for _, g := range c.CompatibilityGroups {
					label("compatibility group", g)
				}
				consumed = append(consumed, c)
			}
		}
	}
	for _, c := range consumed {
		set, ok := sets[c.CounterSet]
		require.True(t, ok, "counter set %s is consumed but not declared", c.CounterSet)
		for name, v := range c.Counters {
			have, ok := set[name]
			require.True(t, ok, "counter %s of set %s is consumed but not declared", name, c.CounterSet)
			require.LessOrEqual(t, v.Value.Cmp(have.Value), 0, "a device consumes more %s of %s than the set holds", name, c.CounterSet)
		}
	}
}

func deviceByName(t *testing.T, s []*resourceapi.ResourceSlice, name string) resourceapi.Device {
	t.Helper()
	for _, sl := range s {
		for _, d := range sl.Spec.Devices {
			if d.Name == name {
				return d
			}
		}
	}
	t.Fatalf("no device %s published", name)
	return resourceapi.Device{}
}

func publishedNames(s []*resourceapi.ResourceSlice) []string {
	var out []string
	for _, sl := range s {
		for _, d := range sl.Spec.Devices {
			out = append(out, d.Name)
		}
	}
	return out
}

func publishedSets(s []*resourceapi.ResourceSlice) []resourceapi.CounterSet {
	var out []resourceapi.CounterSet
	for _, sl := range s {
		out = append(out, sl.Spec.SharedCounters...)
	}
	return out
}

// The slices of the SR-IOV shapes in dynamic mode, as print-slice would
// print them, against testdata/dynamic/<shape>.yaml (a document per slice).
func TestDynamicSliceGolden(t *testing.T) {
	for _, h := range []fakehost.Host{fakehost.P800SRIOV(), fakehost.R200SRIOV()} {
		t.Run(h.Shape, func(t *testing.T) {
			f := newFixture(t, h, dynamicMode)
			require.True(t, f.d.Refresh())
			s := f.d.Slices()
			checkSliceLimits(t, s)
			var out []byte
			for _, sl := range s {
				b, err := yaml.Marshal(sl)
				require.NoError(t, err)
				out = append(append(out, "---\n"...), b...)
			}
			testutil.Golden(t, "dynamic/"+h.Shape+".yaml", out)
		})
	}
}

func TestDynamicPublish(t *testing.T) {
	t.Run("p800x8-sriov: 56 devices, 8 card sets and the handle budget, in slices the API takes", func(t *testing.T) {
		f := newFixture(t, fakehost.P800x8SRIOV(), dynamicMode)
		require.True(t, f.d.Refresh())
		s := f.d.Slices()
		checkSliceLimits(t, s)
		// 9 counter sets: two slices of sets, one of the 56 devices.
		require.Len(t, s, 3)
		require.Len(t, s[0].Spec.SharedCounters, 8)
		require.Len(t, s[1].Spec.SharedCounters, 1)
		require.Len(t, s[2].Spec.Devices, 56)
		sets := publishedSets(s)
		require.Equal(t, "handles", sets[8].Name)
		// 32 handles on Kunlun3, less the 8 PFs'.
		require.Equal(t, int64(24), ptr(sets[8].Counters[CounterHandles].Value).Value())
		names := publishedNames(s)
		require.Equal(t, []string{"xpu-0-q0", "xpu-0-q1", "xpu-0-q2", "xpu-0-q3", "xpu-1-q0", "xpu-1-q1", "xpu-1-q2", "xpu-1-q3"}, names[:8])
		for card := range 8 {
			set := sets[card]
			require.Equal(t, fmt.Sprintf("card-%d", card), set.Name)
			require.Equal(t, int64(96<<30), ptr(set.Counters[CounterMemory].Value).Value())
			whole := deviceByName(t, s, CardName(card))
			require.Equal(t, canonical([]resourceapi.DeviceCounterConsumption{{CounterSet: set.Name, Counters: map[string]resourceapi.Counter{CounterMemory: {Value: resource.MustParse("96Gi")}}}}), canonical(whole.ConsumesCounters))
			require.Equal(t, "pf", *whole.Attributes[AttrSRIOVRole].StringValue)
			for _, tc := range []struct {
				n     int
				size  string
				frac  string
				group string
			}{{2, "48Gi", "1/2", "vfs-2"}, {4, "24Gi", "1/4", "vfs-4"}} {
				for slot := range tc.n {
					d := deviceByName(t, s, SlotName(card, tc.n, slot))
					require.Equal(t, canonical([]resourceapi.DeviceCounterConsumption{
						{CounterSet: set.Name, Counters: map[string]resourceapi.Counter{CounterMemory: {Value: resource.MustParse(tc.size)}}, CompatibilityGroups: []string{tc.group}},
						{CounterSet: "handles", Counters: map[string]resourceapi.Counter{CounterHandles: {Value: resource.MustParse("1")}}},
					}), canonical(d.ConsumesCounters), d.Name)
					require.Equal(t, tc.frac, *d.Attributes[AttrPartition].StringValue, d.Name)
					require.Equal(t, "vf", *d.Attributes[AttrSRIOVRole].StringValue, d.Name)
					require.Equal(t, "P800 VF", *d.Attributes[AttrModel].StringValue, d.Name)
					require.Equal(t, *whole.Attributes["resource.kubernetes.io/pciBusID"].StringValue, *d.Attributes[AttrParentBusID].StringValue, d.Name)
					require.NotContains(t, d.Attributes, resourceapi.QualifiedName("resource.kubernetes.io/pciBusID"), d.Name)
					require.NotContains(t, d.Attributes, resourceapi.QualifiedName(AttrIndex), d.Name)
					require.Equal(t, ptr(resource.MustParse(tc.size)).Value(), ptr(d.Capacity[CapacityMemory].Value).Value(), d.Name)
				}
			}
		}
	})
	t.Run("names and counters do not change with the layout or the node numbering", func(t *testing.T) {
		// The same box with its first card in halves, then in quarters:
		// the second card is /dev/xpu3, then /dev/xpu5.
		halves := newFixture(t, fakehost.P800SRIOV(), dynamicMode)
		quarters := newFixture(t, fakehost.P800Quarters(), dynamicMode)
		halves.d.Refresh()
		quarters.d.Refresh()
		hs, qs := halves.d.Slices(), quarters.d.Slices()
		require.Equal(t, publishedNames(hs), publishedNames(qs))
		require.Equal(t, publishedSets(hs), publishedSets(qs))
		require.Equal(t, []string{
			"xpu-0-q0", "xpu-0-q1", "xpu-0-q2", "xpu-0-q3", "xpu-1-q0", "xpu-1-q1", "xpu-1-q2", "xpu-1-q3",
			"xpu-0-h0", "xpu-0-h1", "xpu-1-h0", "xpu-1-h1", "xpu-0", "xpu-1",
		}, publishedNames(hs))
		// The whole card's index is its PF's node, as in static mode.
		require.Equal(t, int64(3), *deviceByName(t, hs, "xpu-1").Attributes[AttrIndex].IntValue)
		require.Equal(t, int64(5), *deviceByName(t, qs, "xpu-1").Attributes[AttrIndex].IntValue)
	})
	t.Run("no SR-IOV card: the devices as in static mode, no counters", func(t *testing.T) {
		static := newFixture(t, fakehost.P800x8())
		dynamic := newFixture(t, fakehost.P800x8(), dynamicMode)
		static.d.Refresh()
		dynamic.d.Refresh()
		require.Equal(t, static.d.Slices(), dynamic.d.Slices())
		require.Empty(t, publishedSets(dynamic.d.Slices()))
	})
	t.Run("static mode is unchanged on an SR-IOV box", func(t *testing.T) {
		f := newFixture(t, fakehost.P800x8SRIOV())
		f.d.Refresh()
		s := f.d.Slices()
		require.Len(t, s, 1)
		require.Empty(t, s[0].Spec.SharedCounters)
		require.Len(t, s[0].Spec.Devices, 8)
	})
}

// canonical sorts consumptions by set name, for comparisons.
func canonical(c []resourceapi.DeviceCounterConsumption) []resourceapi.DeviceCounterConsumption {
	out := slices.Clone(c)
	slices.SortFunc(out, func(a, b resourceapi.DeviceCounterConsumption) int {
		switch {
		case a.CounterSet < b.CounterSet:
			return -1
		case a.CounterSet > b.CounterSet:
			return 1
		}
		return 0
	})
	for i := range out {
		for k, v := range out[i].Counters {
			// Compare quantities by value, not by their cached text.
			out[i].Counters[k] = resourceapi.Counter{Value: *resource.NewQuantity(v.Value.Value(), v.Value.Format)}
		}
	}
	return out
}

func ptr(q resource.Quantity) *resource.Quantity { return &q }

func TestDynamicHealth(t *testing.T) {
	t.Run("a VF in ERROR taints every device of its card, and only those", func(t *testing.T) {
		f := newFixture(t, fakehost.R200SRIOV(), dynamicMode)
		f.setState(t, 2, "ERROR") // /dev/xpu2: the first of card 0's 3 VFs
		f.d.Refresh()
		s := f.d.Slices()
		checkSliceLimits(t, s)
		for _, name := range publishedNames(s) {
			d := deviceByName(t, s, name)
			if name == "xpu-0" || len(name) > 5 && name[:6] == "xpu-0-" {
				require.Len(t, d.Taints, 1, name)
				require.Equal(t, "ERROR", d.Taints[0].Value, name)
				require.Equal(t, resourceapi.DeviceTaintEffectNoSchedule, d.Taints[0].Effect, name)
			} else {
				require.Empty(t, d.Taints, name)
			}
		}
	})
	t.Run("a cut card's PF in ERROR taints every device of its card", func(t *testing.T) {
		f := newFixture(t, fakehost.R200SRIOV(), dynamicMode)
		f.setState(t, 0, "ERROR")
		f.d.Refresh()
		s := f.d.Slices()
		for _, name := range []string{"xpu-0", "xpu-0-h1", "xpu-0-v3-2", "xpu-0-v1-0"} {
			require.Len(t, deviceByName(t, s, name).Taints, 1, name)
		}
		require.Empty(t, deviceByName(t, s, "xpu-1-v3-0").Taints)
	})
	t.Run("the kubelet is told the health of every published device", func(t *testing.T) {
		f := newFixture(t, fakehost.R200SRIOV(), dynamicMode)
		f.setState(t, 1, "ERROR") // the second card, whole
		f.d.Refresh()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		reports := make(chan kubeletplugin.DeviceHealthReport, 1)
		go func() { _ = f.d.WatchHealthStatus(ctx, reports) }()
		var r kubeletplugin.DeviceHealthReport
		select {
		case r = <-reports:
		case <-time.After(5 * time.Second):
			t.Fatal("no health report in 5s")
		}
		require.Len(t, r.Devices, 14)
		for _, h := range r.Devices {
			want := kubeletplugin.HealthStatusHealthy
			if h.DeviceName == "xpu-1" || h.DeviceName[:min(6, len(h.DeviceName))] == "xpu-1-" {
				want = kubeletplugin.HealthStatusUnhealthy
			}
			require.Equal(t, want, h.Health, h.DeviceName)
		}
	})
}
