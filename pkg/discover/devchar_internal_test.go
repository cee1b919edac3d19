package discover

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDevCharSourceAlone runs the /sys/dev/char source by itself on a
// hand-made sysfs: it maps the node to its function and adds nothing else
// (models, bindings and notes are other sources' work).
func TestDevCharSourceAlone(t *testing.T) {
	root := t.TempDir()
	write := func(p, data string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, p), []byte(data), 0o444))
	}
	link := func(target, p string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		require.NoError(t, os.Symlink(target, filepath.Join(root, p)))
	}
	fn := "/sys/devices/pci0000:40/0000:40:01.0/0000:41:00.0"
	write(fn+"/vendor", "0x1d22\n")
	write(fn+"/device", "0x3689\n")
	write(fn+"/numa_node", "1\n")
	write(fn+"/accel/xpu5/dev", "195:5\n")
	link("../../../0000:41:00.0", fn+"/accel/xpu5/device")
	link("../../devices/pci0000:40/0000:40:01.0/0000:41:00.0/accel/xpu5", "/sys/dev/char/195:5")

	h := &Host{DevRoot: root}
	h.addDevice(&Device{Index: 5, Node: Node{Path: "/dev/xpu5", Major: 195, Minor: 5}, Model: ModelUnknown, Compute: true})
	h.addDevice(&Device{Index: 6, Node: Node{Path: "/dev/xpu6", Major: 195, Minor: 6}, Model: ModelUnknown, Compute: true})
	hr := newHostRoot(root)
	defer hr.close()
	require.NoError(t, newDevCharSource(newSysfs(hr), &pciSeen{}).Discover(h))

	d := h.Device(5)
	require.Empty(t, d.Problems)
	require.Equal(t, &PCI{
		Address: "0000:41:00.0", VendorID: 0x1d22, DeviceID: 0x3689, NUMANode: 1,
		Function: FunctionPF, PCIeRoot: "pci0000:40",
	}, d.PCI)
	require.Equal(t, ModelUnknown, d.Model, "models are the merge source's")
	require.Nil(t, h.Device(6).PCI)
	require.Len(t, h.Device(6).Problems, 1)
	require.Contains(t, h.Device(6).Problems[0], "/sys/dev/char/195:6 not found")
	require.Empty(t, h.Warnings)
	require.Empty(t, h.Notes)
}

func TestIsRootComplex(t *testing.T) {
	for name, want := range map[string]bool{
		"pci0000:00": true, "pci0000:80": true, "pci10000:00": true,
		"pci0000:0": false, "pci000:00": false, "pci0000:0g": false, "pci0000-00": false,
		"platform": false, "0000:00:01.0": false, "virtual": false, "pci": false,
	} {
		require.Equal(t, want, isRootComplex(name), name)
	}
}
