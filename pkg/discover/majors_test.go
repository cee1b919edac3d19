package discover_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// TestNodesOfTheDriversMajor: a host whose nodes, sysfs dev files and
// /sys/dev/char entries all agree on a major (10, misc: 10:232 is
// /dev/kvm) that /proc/devices does not name for xpu offers none of them,
// on both driver generations; the same hosts with /proc/devices naming
// their major offer every node, as before; without an xpu line (or without
// /proc/devices) nothing is checked and a note says so.
func TestNodesOfTheDriversMajor(t *testing.T) {
	for _, tc := range []struct {
		shape  fakehost.Host
		driver string // the major /proc/devices names for xpu in the planted case
	}{
		{fakehost.R200SRIOV(), "243"},
		{fakehost.P800x8(), "243"},
		{fakehost.P800XRE5(), "195"},
	} {
		t.Run(tc.shape.Shape, func(t *testing.T) {
			t.Run("consistent: every node offered, nothing said", func(t *testing.T) {
				tree := build(t, tc.shape)
				h := discoverWithin(t, tree)
				require.Len(t, h.ComputeDevices(), len(tree.ComputeDevices()))
				require.NotNil(t, h.Control)
				for _, d := range h.Devices {
					require.NotContains(t, strings.Join(d.Problems, "\n"), "not the driver's node")
				}
				require.NotContains(t, strings.Join(h.Notes, "\n"), "majors are not checked")
			})
			t.Run("nodes of another major: none offered", func(t *testing.T) {
				shape := tc.shape
				shape.Major = 10
				shape.Devices = append([]fakehost.Device(nil), shape.Devices...)
				shape.Devices[1].Minor = 232
				tree := build(t, shape)
				data, err := os.ReadFile(tree.Path("/proc/devices"))
				require.NoError(t, err)
				text := strings.Replace(string(data), " 10 xpu\n", " 10 misc\n", 1)
				text = strings.Replace(text, "Character devices:\n", "Character devices:\n"+tc.driver+" xpu\n", 1)
				require.NoError(t, tree.WriteFile("/proc/devices", []byte(text)))

				h := discoverWithin(t, tree)
				require.Empty(t, h.ComputeDevices(), "no node of major 10 is the driver's")
				x1 := h.Device(1)
				require.NotNil(t, x1)
				require.Equal(t, uint32(232), x1.Node.Minor)
				require.Contains(t, strings.Join(x1.Problems, "\n"),
					"/dev/xpu1 is char 10:232, but "+tree.Path("/proc/devices")+" names major "+tc.driver+" for xpu: not the driver's node; not offered")
				require.Nil(t, h.Control)
				require.Contains(t, strings.Join(h.Warnings, "\n"), "not the driver's control node; ignored")
				require.ErrorIs(t, h.CheckUsable(), discover.ErrNoControlNode)
			})
			t.Run("no xpu line: unchecked, with a note", func(t *testing.T) {
				tree := build(t, tc.shape)
				data, err := os.ReadFile(tree.Path("/proc/devices"))
				require.NoError(t, err)
				var kept []string
				for _, l := range strings.SplitAfter(string(data), "\n") {
					if f := strings.Fields(l); len(f) != 2 || f[1] != "xpu" {
						kept = append(kept, l)
					}
				}
				require.NoError(t, tree.WriteFile("/proc/devices", []byte(strings.Join(kept, ""))))
				h := discoverWithin(t, tree)
				require.Len(t, h.ComputeDevices(), len(tree.ComputeDevices()))
				require.Contains(t, strings.Join(h.Notes, "\n"), `/proc/devices has no "xpu" char device line; the device nodes' majors are not checked`)
			})
		})
	}
	t.Run("no /proc/devices", func(t *testing.T) {
		shape := fakehost.R200SRIOV()
		shape.NoProcfs = true
		tree := build(t, shape)
		h := discoverWithin(t, tree)
		require.Len(t, h.ComputeDevices(), len(tree.ComputeDevices()))
		require.Contains(t, strings.Join(h.Notes, "\n"), "/proc/devices: not found; the device nodes' majors are not checked")
	})
}
