package discover_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// The facts of one device of each shape: what labels, DRA attributes and
// info publish.
func TestFactsOf(t *testing.T) {
	for _, tc := range []struct {
		description string
		host        fakehost.Host
		index       int
		want        discover.Facts
	}{
		{
			description: "P800 on driver 4 layout: procfs gives memory and driver version",
			host:        fakehost.P800x8(), index: 0,
			want: discover.Facts{
				Model: "P800", Board: "P800", Generation: discover.GenerationKunlun3, Serial: "02P00A5240V00101",
				DriverVersion: fakehost.DriverVersionP800, XREVersion: fakehost.DriverVersionP800, MemoryMiB: 98304,
			},
		},
		{
			description: "P800 on driver 5 through /sys/dev/char: no procfs, memory from the board",
			host:        fakehost.P800Sysfs(), index: 3,
			want: discover.Facts{
				Model: "P800", Board: "P800", Generation: discover.GenerationKunlun3,
				XREVersion: fakehost.XREVersionP800, MemoryMiB: 98304,
			},
		},
		{
			description: "P800 VF on driver 5: Kunlun3 from its model, half a card with 2 VFs",
			host:        fakehost.P800SRIOV(), index: 2,
			want: discover.Facts{
				Model: "P800 VF", Board: "P800", Generation: discover.GenerationKunlun3,
				XREVersion: fakehost.XREVersionP800, MemoryMiB: 49152,
			},
		},
		{
			description: "P800 PF with VFs enabled: the whole card",
			host:        fakehost.P800SRIOV(), index: 0,
			want: discover.Facts{
				Model: "P800", Board: "P800", Generation: discover.GenerationKunlun3,
				XREVersion: fakehost.XREVersionP800, MemoryMiB: 98304,
			},
		},
		{
			description: "P800 on driver 5 without any node-to-PCI source: only the XRE is known",
			host:        fakehost.P800XRE5(), index: 0,
			want: discover.Facts{Model: discover.ModelUnknown, Board: discover.ModelUnknown, XREVersion: fakehost.XREVersionP800},
		},
		{
			description: "R200 VF: procfs memory wins over the board's size",
			host:        fakehost.R200SRIOV(), index: 2,
			want: discover.Facts{
				Model: "R200 VF", Board: "R200", Generation: discover.GenerationKunlun2, Serial: "02K00Y6217V00009",
				DriverVersion: fakehost.DriverVersionKunlun2, XREVersion: fakehost.DriverVersionKunlun2, MemoryMiB: 5120,
			},
		},
		{
			description: "K200: Kunlun1 from procfs's DeviceName, no memory",
			host:        fakehost.K200(), index: 1,
			want: discover.Facts{
				Model: "K200", Board: "K200", Generation: discover.GenerationKunlun1, Serial: "22f",
				DriverVersion: fakehost.DriverVersionKunlun2, XREVersion: fakehost.DriverVersionKunlun2, FirmwareVersion: "0001.0000.0020",
			},
		},
		{
			description: "unknown device ID: the generation from procfs",
			host:        fakehost.Degraded(), index: 0,
			want: discover.Facts{
				Model: discover.ModelUnknown, Board: discover.ModelUnknown, Generation: discover.GenerationKunlun2, Serial: "02K00Y6217V00009",
				DriverVersion: fakehost.DriverVersionKunlun2, XREVersion: fakehost.DriverVersionKunlun2, MemoryMiB: 16384,
			},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			h, err := discoverTree(t, build(t, tc.host))
			require.NoError(t, err)
			d := h.Device(tc.index)
			require.NotNil(t, d)
			require.Equal(t, tc.want, h.FactsOf(d))
		})
	}
}

// The rules, on devices no fake shape has.
func TestFactsRules(t *testing.T) {
	vf := func(model string, numVFs int) *discover.Device {
		return &discover.Device{Model: model, PCI: &discover.PCI{Function: discover.FunctionVF, ParentNumVFs: numVFs}}
	}
	for _, tc := range []struct {
		description string
		host        discover.Host
		dev         *discover.Device
		check       func(t *testing.T, f discover.Facts)
	}{
		{"a Kunlun2 VF of an unknown card: Kunlun2, no board", discover.Host{}, vf("Kunlun2 VF", 3), func(t *testing.T, f discover.Facts) {
			require.Equal(t, discover.GenerationKunlun2, f.Generation)
			require.Equal(t, discover.ModelUnknown, f.Board)
			require.Zero(t, f.MemoryMiB)
		}},
		{"a P800 VF of a card cut in 4", discover.Host{}, vf("P800 VF", 4), func(t *testing.T, f discover.Facts) {
			require.Equal(t, int64(24576), f.MemoryMiB)
		}},
		{"a P800 VF of a card whose VF count is unknown: no memory", discover.Host{}, vf("P800 VF", 0), func(t *testing.T, f discover.Facts) {
			require.Zero(t, f.MemoryMiB)
			require.Equal(t, discover.GenerationKunlun3, f.Generation)
		}},
		{"a P800 VF of a layout no source gives (3 VFs): no memory", discover.Host{}, vf("P800 VF", 3), func(t *testing.T, f discover.Facts) {
			require.Zero(t, f.MemoryMiB)
		}},
		{"an R200 VF without mminfo: the xpuml size", discover.Host{}, vf("R200 VF", 2), func(t *testing.T, f discover.Facts) {
			require.Equal(t, int64(8192), f.MemoryMiB)
		}},
		{"the module's version wins over the device's", discover.Host{DriverVersion: "4.33.1"}, &discover.Device{DriverVersion: "4.33.0", Model: "R200"}, func(t *testing.T, f discover.Facts) {
			require.Equal(t, "4.33.1", f.DriverVersion)
		}},
		{"no module version: the device's", discover.Host{}, &discover.Device{DriverVersion: "4.33.0", Model: "R200"}, func(t *testing.T, f discover.Facts) {
			require.Equal(t, "4.33.0", f.DriverVersion)
		}},
		{"Kunlun1 boards and generations named by procfs", discover.Host{}, &discover.Device{Model: discover.ModelUnknown, ProcDeviceName: "K100"}, func(t *testing.T, f discover.Facts) {
			require.Equal(t, discover.GenerationKunlun1, f.Generation)
		}},
		{"procfs says Kunlun3", discover.Host{}, &discover.Device{Model: discover.ModelUnknown, ProcDeviceName: "Kunlun3\n"}, func(t *testing.T, f discover.Facts) {
			require.Equal(t, discover.GenerationKunlun3, f.Generation)
		}},
		{"procfs names something else: no generation", discover.Host{}, &discover.Device{Model: discover.ModelUnknown, ProcDeviceName: "Kunlun9"}, func(t *testing.T, f discover.Facts) {
			require.Empty(t, f.Generation)
		}},
	} {
		t.Run(tc.description, func(t *testing.T) { tc.check(t, tc.host.FactsOf(tc.dev)) })
	}
}

func TestXREVersion(t *testing.T) {
	for _, tc := range []struct{ link, target, want string }{
		{"/usr/local/xpu", "/usr/local/xpu-5.0.21.47", "5.0.21.47"},
		{"/usr/local/xpu", "/usr/local/xpu-4.33.0", "4.33.0"},
		{"/usr/local/xpu", "/usr/local/xpu-5.0.21.47-rc1", "5.0.21.47-rc1"},
		{"/usr/local/xpu", "/opt/xre-5.0.21.47", ""},
		{"/usr/local/xpu", "/usr/local/xpu-latest", ""},
		{"/usr/local/xpu", "", ""},
		{"", "", ""},
	} {
		t.Run(tc.target, func(t *testing.T) {
			h := discover.Host{XRELink: tc.link, XRETarget: tc.target}
			require.Equal(t, tc.want, h.XREVersion())
		})
	}
}
