package discover

import (
	"fmt"
	"os"
)

// Function is the PCI role of a device.
type Function string

const (
	// FunctionUnknown means sysfs could not tell.
	FunctionUnknown Function = "unknown"
	// FunctionPF is a physical function.
	FunctionPF Function = "pf"
	// FunctionVF is an SR-IOV virtual function.
	FunctionVF Function = "vf"
)

// ModelUnknown is the model of a Kunlun device whose IDs are not in the table.
const ModelUnknown = "unknown"

// Node is a character device node as found on the host.
type Node struct {
	// Path is where the node lives relative to the dev root, e.g. /dev/xpu0;
	// it is also the path the node gets inside a container.
	Path string
	// HostPath is where the node can be opened on this host (dev root + Path).
	HostPath string
	Major    uint32
	Minor    uint32
	// Mode holds the permission bits only.
	Mode os.FileMode
	UID  uint32
	GID  uint32
}

// PCI is what sysfs says about the PCI function behind a device.
type PCI struct {
	// Address is the PCI address (domain:bus:device.function), e.g. 0000:3b:00.0.
	Address         string
	VendorID        uint16
	DeviceID        uint16
	SubsystemVendor uint16
	SubsystemDevice uint16
	// NUMANode is -1 when the kernel does not know it (or sysfs did not say).
	NUMANode int
	Function Function
	// Parent is the physical function of a VF.
	Parent string
	// NumVFs is the number of enabled VFs of a PF (sriov_numvfs).
	NumVFs int
	// TotalVFs is the number of VFs a PF supports (sriov_totalvfs); 0 when
	// the function has no SR-IOV capability.
	TotalVFs int
	// ParentNumVFs is, for a VF, the number of enabled VFs of its PF (the
	// PF's sriov_numvfs): how many partitions the card is cut into. 0 when
	// sysfs does not say.
	ParentNumVFs int
	// PCIeRoot is the PCI root complex the function sits below, as sysfs
	// names it (pci0000:00, the first directory of its path below
	// /sys/devices): functions with the same root share a host bridge.
	PCIeRoot string
}

// Device is one /dev/xpuN node with everything known about it.
type Device struct {
	// Index is the N of /dev/xpuN.
	Index int
	Node  Node
	// PCI is nil when sysfs had nothing for this device: no source
	// (/sys/dev/char/MAJ:MIN, /sys/class/xpu/xpuN) led from its node to a
	// PCI function.
	PCI *PCI
	// From /proc/xpu/devN.
	ProcAddress string // DeviceAddr
	// ProcDeviceName is the info file's DeviceName as the driver writes
	// it: the Kunlun1 board (K100, K200) or the generation (Kunlun2,
	// Kunlun3). Facts.Generation is the generation whatever the source.
	ProcDeviceName string
	Serial         string
	// DriverVersion is the info file's DriverVersion (Facts.DriverVersion
	// is the one to publish).
	DriverVersion   string
	FirmwareVersion string
	State           string
	// MemoryMiB is the device memory from procfs mminfo (its MAIN line); 0
	// when the driver does not tell (Kunlun1, driver 5.x without
	// /proc/xpu). Facts.MemoryMiB falls back to the board's public size.
	MemoryMiB int64
	// Model is derived from the PCI IDs (and, for Kunlun1, procfs); ModelUnknown
	// when no source could tell.
	Model string
	// Compute is false for a PF whose VFs are enabled: such a PF can only be
	// used for management and is not offered to containers.
	Compute bool
	// Problems lists what could not be read about this device.
	Problems []string
	// pciFrom is the sysfs entry PCI was read through, for the problem of
	// a later source that disagrees.
	pciFrom string
}

// Address returns the PCI address of the device from sysfs or, failing
// that, from procfs; empty when neither knows it.
func (d *Device) Address() string {
	if d.PCI != nil && d.PCI.Address != "" {
		return d.PCI.Address
	}
	return d.ProcAddress
}

// DriverFileKind tells libraries from tools.
type DriverFileKind string

const (
	// KindLibrary is a shared library of the XRE.
	KindLibrary DriverFileKind = "library"
	// KindTool is an executable such as xpu-smi.
	KindTool DriverFileKind = "tool"
)

// DriverFile is a user-space driver file to be made available in containers.
type DriverFile struct {
	Kind DriverFileKind
	// Path is the path inside a container (the path below the driver root,
	// with the XRE version link kept, e.g. /usr/local/xpu/lib64/libxpurt.so.1).
	Path string
	// HostPath is the regular file on the host that Path is backed by, with
	// every symlink resolved inside the driver root.
	HostPath string
	// Soname is the ELF SONAME of a library.
	Soname string
	// Links are extra names for Path in the same directory (development links
	// like libxpurt.so, tool aliases like xpu_smi).
	Links []string
	// AlsoAt are other container paths the same file is mounted at: the
	// versioned file a system library's SONAME link names on the host
	// (/lib/x86_64-linux-gnu/libxpunvidia-ml.so.5.0.21.47 for
	// libxpunvidia-ml.so.1).
	AlsoAt []string
	// FromLoaderCache is true for a library found through the driver root's
	// ld.so.cache rather than in an XRE directory: it lives in a directory
	// shared with many other libraries (a system library directory).
	FromLoaderCache bool
}

// Host is the result of discovery.
type Host struct {
	DevRoot    string
	DriverRoot string
	// Control is the /dev/xpuctrl node, nil when missing.
	Control *Node
	// Devices are sorted by Index.
	Devices []*Device
	// DriverVersion is from /proc/xpu/version, else /sys/module/kunlun/version
	// (empty when neither is there: driver 5.x hosts).
	DriverVersion string
	// XRELink is the XRE version link (/usr/local/xpu) when it leads to a
	// directory, XRETarget the in-root directory it names when it is a link.
	XRELink   string
	XRETarget string
	// Libraries and Tools found under the driver root.
	Libraries []DriverFile
	Tools     []DriverFile
	// Warnings are host-wide problems: missing driver files, unreadable
	// procfs, ...
	Warnings []string
	// Notes are host-wide facts worth a line of `xpu-cdi info` but not a
	// warning: an optional source the driver does not provide (/proc/xpu,
	// /sys/class/xpu on driver 5.x), which runtime library was chosen and
	// why, what was left out of an upgrade's leftovers.
	Notes []string

	byIndex map[int]*Device
}

// Device returns the device with index n, or nil.
func (h *Host) Device(n int) *Device {
	return h.byIndex[n]
}

// ComputeDevices returns the devices that may be given to containers.
func (h *Host) ComputeDevices() []*Device {
	var out []*Device
	for _, d := range h.Devices {
		if d.Compute {
			out = append(out, d)
		}
	}
	return out
}

func (h *Host) addDevice(d *Device) {
	if h.byIndex == nil {
		h.byIndex = make(map[int]*Device)
	}
	h.byIndex[d.Index] = d
	h.Devices = append(h.Devices, d)
}

func (h *Host) warnf(format string, args ...any) {
	h.Warnings = append(h.Warnings, fmt.Sprintf(format, args...))
}

func (h *Host) notef(format string, args ...any) {
	h.Notes = append(h.Notes, fmt.Sprintf(format, args...))
}

func (d *Device) problemf(format string, args ...any) {
	d.Problems = append(d.Problems, fmt.Sprintf(format, args...))
}
