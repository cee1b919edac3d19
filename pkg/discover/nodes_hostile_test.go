package discover_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

// TestNodesNotOffered: a /dev/xpuN that is a symlink (to /dev/kvm) is not
// a device at all, and a node whose major:minor sysfs contradicts (the
// 4.x class device's dev file, or the 5.x /sys/dev/char entry) is not
// offered; the other devices are, on the 4.x and the P800 / 5.x shapes.
func TestNodesNotOffered(t *testing.T) {
	for _, tc := range []struct {
		description string
		shape       fakehost.Host
		plant       func(t *testing.T, tree *fakehost.Tree)
		want        string
		absent      bool
	}{
		{
			description: "4.x /dev/xpu1 -> /dev/kvm",
			shape:       fakehost.R200SRIOV(),
			plant:       func(t *testing.T, tree *fakehost.Tree) { relink(t, tree, "/dev/xpu1", "/dev/kvm") },
			want:        "/dev/xpu1 is a symlink",
			absent:      true,
		},
		{
			description: "P800 /dev/xpu1 -> /dev/kvm",
			shape:       fakehost.P800Sysfs(),
			plant:       func(t *testing.T, tree *fakehost.Tree) { relink(t, tree, "/dev/xpu1", "/dev/kvm") },
			want:        "/dev/xpu1 is a symlink",
			absent:      true,
		},
		{
			description: "P800 XRE5 /dev/xpu1 -> ../dev/xpu0",
			shape:       fakehost.P800XRE5(),
			plant:       func(t *testing.T, tree *fakehost.Tree) { relink(t, tree, "/dev/xpu1", "xpu0") },
			want:        "/dev/xpu1 is a symlink",
			absent:      true,
		},
		{
			description: "4.x class device's dev file contradicts the node",
			shape:       fakehost.R200SRIOV(),
			plant: func(t *testing.T, tree *fakehost.Tree) {
				dev := tree.Path("/sys/class/xpu/xpu1/dev")
				require.NoError(t, os.Remove(dev))
				require.NoError(t, os.WriteFile(dev, []byte("10:232\n"), 0o444))
			},
			want: "/sys/class/xpu/xpu1/dev says 10:232",
		},
		{
			description: "P800 /sys/dev/char entry leads to another node's class device",
			shape:       fakehost.P800Sysfs(),
			plant: func(t *testing.T, tree *fakehost.Tree) {
				require.Equal(t, 1, tree.Devices[1].Index)
				relink(t, tree, tree.Devices[1].DevChar, strings.TrimPrefix(tree.Devices[2].DevChar, "/sys/dev/char/"))
			},
			want: "not the entry of",
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tree := build(t, tc.shape)
			before := discoverWithin(t, tree)
			require.True(t, before.Device(1) != nil && before.Device(1).Compute, "xpu1 is offered before")
			tc.plant(t, tree)
			h := discoverWithin(t, tree)
			for _, d := range h.ComputeDevices() {
				require.NotEqual(t, 1, d.Index, "xpu1 is not offered")
			}
			if tc.absent {
				require.Nil(t, h.Device(1))
				require.Contains(t, strings.Join(h.Warnings, "\n"), tc.want)
			} else {
				require.Contains(t, strings.Join(h.Device(1).Problems, "\n"), tc.want)
				require.Contains(t, strings.Join(h.Device(1).Problems, "\n"), "not offered")
			}
			require.Len(t, h.ComputeDevices(), len(before.ComputeDevices())-1, "the others are")
		})
	}
}
