package discover_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// relink replaces the in-tree link p with one to target (as written).
func relink(t *testing.T, tree *fakehost.Tree, p, target string) {
	t.Helper()
	require.NoError(t, os.RemoveAll(tree.Path(p)))
	require.NoError(t, os.Symlink(target, tree.Path(p)))
}

// TestDevCharHost discovers the P800 host whose nodes are found through
// /sys/dev/char only: every node gets the PCI function its own major:minor
// leads to (not the one of its place in address order), with its NUMA node,
// root complex and model, and nothing is a problem or a warning.
func TestDevCharHost(t *testing.T) {
	tree := build(t, fakehost.P800Sysfs())
	h, err := discoverTree(t, tree)
	require.NoError(t, err)
	require.Empty(t, h.Warnings)
	require.Len(t, h.Devices, 8)
	for _, td := range tree.Devices {
		d := h.Device(td.Index)
		require.Empty(t, d.Problems, "xpu%d", td.Index)
		require.NotNil(t, d.PCI, "xpu%d", td.Index)
		require.Equal(t, td.BDF, d.Address(), "xpu%d", td.Index)
		require.Equal(t, td.NUMANode, d.PCI.NUMANode, "xpu%d", td.Index)
		wantRoot := "pci0000:00"
		if td.NUMANode == 1 {
			wantRoot = "pci0000:80"
		}
		require.Equal(t, wantRoot, d.PCI.PCIeRoot, "xpu%d", td.Index)
		require.Equal(t, discover.FunctionPF, d.PCI.Function)
		require.Equal(t, "P800", d.Model)
		require.True(t, d.Compute)
	}
	require.Equal(t, "0000:82:00.0", h.Device(0).Address())
	require.Equal(t, "0000:01:00.0", h.Device(3).Address())
	require.Equal(t, 1, countContaining(h.Notes, "proc/xpu not present"), h.Notes)
	require.Equal(t, 1, countContaining(h.Notes, "sys/class/xpu not present"), h.Notes)
	require.Zero(t, countContaining(h.Notes, "no PCI address"), h.Notes)

	// One device asked for reads its own entry only, and gets the same.
	one, err := discoverTree(t, tree, discover.WithIndices(3))
	require.NoError(t, err)
	require.Len(t, one.Devices, 1)
	require.Equal(t, "0000:01:00.0", one.Devices[0].Address())
	require.Empty(t, one.Devices[0].Problems)
	require.Empty(t, one.Warnings, "the functions of devices not asked for are not 'without a node'")
}

// TestP800DeviceIDs: the four P800 device IDs name a P800; a VF (its
// physfn link says so) is a "P800 VF" and its PF, with VFs enabled, is
// management only.
func TestP800DeviceIDs(t *testing.T) {
	host := fakehost.P800Sysfs()
	for i := range host.Devices {
		host.Devices[i].DeviceID = 0x3686 + uint16(i%4)
	}
	// Two VFs on the card of /dev/xpu3 (0000:01:00.0).
	pf := &host.Devices[3]
	pf.TotalVFs = 2
	for k := range 2 {
		vf := *pf
		vf.Index, vf.Minor = 8+k, uint32(8+k)
		vf.BDF = fmt.Sprintf("0000:01:00.%d", 1+k)
		vf.Function, vf.PhysFn, vf.TotalVFs = fakehost.FunctionVF, pf.BDF, 0
		host.Devices = append(host.Devices, vf)
	}
	tree := build(t, host)
	h, err := discoverTree(t, tree)
	require.NoError(t, err)
	require.Empty(t, h.Warnings)
	for i := range 8 {
		d := h.Device(i)
		require.Empty(t, d.Problems, "xpu%d", i)
		require.Equal(t, uint16(0x3686+i%4), d.PCI.DeviceID)
		require.Equal(t, "P800", d.Model, "device ID %#04x", d.PCI.DeviceID)
	}
	require.False(t, h.Device(3).Compute, "a PF with VFs enabled is management only")
	require.Equal(t, 2, h.Device(3).PCI.NumVFs)
	require.Equal(t, 2, h.Device(3).PCI.TotalVFs)
	require.Zero(t, h.Device(0).PCI.TotalVFs, "no SR-IOV capability")
	for _, n := range []int{8, 9} {
		vf := h.Device(n)
		require.Empty(t, vf.Problems)
		require.Equal(t, discover.FunctionVF, vf.PCI.Function)
		require.Equal(t, "0000:01:00.0", vf.PCI.Parent)
		require.Equal(t, "P800 VF", vf.Model)
		require.True(t, vf.Compute)
	}

	// A physfn link out of /sys/devices names no parent.
	relink(t, tree, "/sys/bus/pci/devices/0000:01:00.2/physfn", "/etc")
	h, err = discoverTree(t, tree)
	require.NoError(t, err)
	vf := h.Device(9)
	require.Equal(t, discover.FunctionVF, vf.PCI.Function)
	require.Empty(t, vf.PCI.Parent)
	require.Len(t, vf.Problems, 1)
	require.Contains(t, vf.Problems[0], "physfn leads to /etc, outside /sys/devices")
}

// TestPCISourcesDisagree: where /sys/class/xpu and /sys/dev/char both
// exist (driver 4.x) they agree; where they do not, the node's own
// major:minor wins and the device has a problem saying so.
func TestPCISourcesDisagree(t *testing.T) {
	host := fakehost.R200SRIOV()
	host.SysDevChar = true
	tree := build(t, host)
	h, err := discoverTree(t, tree)
	require.NoError(t, err)
	for _, d := range h.Devices {
		require.Empty(t, d.Problems, "xpu%d: the two sources agree", d.Index)
	}
	require.Empty(t, h.Warnings)

	// /sys/class/xpu/xpu1 made by hand: the right number, the wrong
	// function (xpu0's).
	class, bogus := "/sys/class/xpu/xpu1", "/sys/devices/virtual/xpu/bogus"
	require.NoError(t, os.MkdirAll(tree.Path(bogus), 0o755))
	require.NoError(t, os.WriteFile(tree.Path(bogus+"/dev"), fmt.Appendf(nil, "%d:2\n", host.Major), 0o444))
	require.NoError(t, os.Symlink("../../../pci0000:00/0000:3b:00.0", tree.Path(bogus+"/device")))
	relink(t, tree, class, "../../devices/virtual/xpu/bogus")
	h, err = discoverTree(t, tree)
	require.NoError(t, err)
	d := h.Device(1)
	require.Equal(t, "0000:5e:00.0", d.Address(), "the node's own major:minor wins")
	require.Len(t, d.Problems, 1, d.Problems)
	require.Contains(t, d.Problems[0], class+"/device leads to PCI function 0000:3b:00.0, but ")
	require.Contains(t, d.Problems[0], fmt.Sprintf("/sys/dev/char/%d:2 leads to 0000:5e:00.0", host.Major))
}

// TestKunlunBindings: a function the kunlun driver binds is a Kunlun
// device whatever its vendor ID; a node whose function it does not bind,
// and a bound function without a node, are reported.
func TestKunlunBindings(t *testing.T) {
	host := fakehost.P800Sysfs()
	host.Devices[6].NoNode = true // 0000:83:00.0
	tree := build(t, host)
	drv := "/sys/bus/pci/drivers/kunlun/"
	// xpu1 (0000:03:00.0): another vendor's ID, bound to kunlun.
	require.NoError(t, tree.WriteFile(drv+"0000:03:00.0/vendor", []byte("0x10de\n")))
	// xpu2 (0000:84:00.0): not bound. xpu5 (0000:02:00.0): another
	// vendor's, not bound.
	require.NoError(t, tree.WriteFile(drv+"0000:02:00.0/vendor", []byte("0x10de\n")))
	require.NoError(t, os.Remove(tree.Path(drv+"0000:84:00.0")))
	require.NoError(t, os.Remove(tree.Path(drv+"0000:02:00.0")))

	h, err := discoverTree(t, tree)
	require.NoError(t, err)
	require.Nil(t, h.Device(6))
	require.Empty(t, h.Device(1).Problems, "bound to kunlun: a Kunlun device, model unknown")
	require.Equal(t, discover.ModelUnknown, h.Device(1).Model)
	require.Equal(t, []string{fmt.Sprintf("sysfs: PCI function 0000:84:00.0 is not bound to the kunlun driver (no %s)", tree.Path(drv+"0000:84:00.0"))}, h.Device(2).Problems)
	require.Len(t, h.Device(5).Problems, 1)
	require.Contains(t, h.Device(5).Problems[0], "PCI function 0000:02:00.0 has vendor 0x10de, not Kunlun (0x1d22), and is not bound to the kunlun driver")
	require.Equal(t, []string{"PCI functions bound to the kunlun driver with no /dev/xpuN node: 0000:83:00.0; they are not offered (do the nodes exist? udev rules?)"}, h.Warnings)

	one, err := discoverTree(t, tree, discover.WithIndices(2))
	require.NoError(t, err)
	require.Empty(t, one.Warnings)
	require.Len(t, one.Devices[0].Problems, 1, "the binding of a selected device is still checked")
}

// TestNoMappingNote: on a P800 host without any source mapping nodes to PCI
// functions, one note names the functions the driver binds, and no address
// is guessed.
func TestNoMappingNote(t *testing.T) {
	tree := build(t, fakehost.P800XRE5())
	h, err := discoverTree(t, tree)
	require.NoError(t, err)
	note := ""
	for _, n := range h.Notes {
		if strings.HasPrefix(n, "no PCI address") {
			note = n
		}
	}
	require.Contains(t, note, "/sys/dev/char/MAJ:MIN")
	require.Contains(t, note, "the kunlun driver binds 8 PCI functions, 0000:01:00.0, 0000:02:00.0, 0000:03:00.0, 0000:04:00.0, 0000:81:00.0, 0000:82:00.0, 0000:83:00.0, 0000:84:00.0, but nothing says which node is whose")
	for _, d := range h.Devices {
		require.Empty(t, d.Address())
	}
}
