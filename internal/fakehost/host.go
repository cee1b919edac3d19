package fakehost

import (
	"fmt"
	"os"
	"strings"
)

// Family is the Kunlun chip generation, which decides the procfs formats.
type Family string

// Chip generations.
const (
	// Kunlun1 is K100/K200: procfs "key: value" (one space), rich state set.
	Kunlun1 Family = "Kunlun1"
	// Kunlun2 is the R series (R100, R200, R300, RG800 ...): "key:\tvalue".
	Kunlun2 Family = "Kunlun2"
	// Kunlun3 is P800 (driver 5.x): formats inferred from Kunlun2.
	Kunlun3 Family = "Kunlun3"
)

// Function says whether a device is a PCI physical or SR-IOV virtual function.
type Function string

// PCI function kinds.
const (
	FunctionPF Function = "pf"
	FunctionVF Function = "vf"
)

// PCI identifiers used by the shapes.
const (
	VendorKunlun    uint16 = 0x1d22
	DeviceIDPF      uint16 = 0x3684 // Kunlun1 and Kunlun2 physical function
	DeviceIDVF      uint16 = 0x3685 // Kunlun2 SR-IOV virtual function
	DeviceIDP800    uint16 = 0x3688 // P800, as reported by third parties
	DeviceIDUnknown uint16 = 0x3699 // a 0x1d22 device ID nobody knows
)

// DefaultMajor is the dynamic major most often seen for the xpu driver.
const DefaultMajor uint32 = 243

// CtrlMinor is the minor of /dev/xpuctrl (driver 4.x).
const CtrlMinor uint32 = 128

// Driver 5.x (P800) nodes: static major 195, minor N, xpuctrl minor 255.
const (
	MajorXRE5     uint32 = 195
	CtrlMinorXRE5 uint32 = 255
)

// Layout is the driver generation whose user-space layout a host imitates.
type Layout string

// Driver layouts.
const (
	// LayoutXRE4 is driver/XRE 4.x (Kunlun1/Kunlun2, the public driver):
	// /proc/xpu, /sys/class/xpu, the XRE libraries in lib64 registered in
	// ld.so.conf.d. The empty Layout means this one.
	LayoutXRE4 Layout = "xre4"
	// LayoutXRE5 is driver/XRE 5.x (P800): /proc/kunlun instead of
	// /proc/xpu, no /sys/class/xpu, the libraries in the XRE's so/
	// directory (not in ld.so.cache), libxpunvidia-ml in the system
	// library directory, a dynamically linked xpu-smi.
	LayoutXRE5 Layout = "xre5"
)

// Device describes one /dev/xpuN device of a fake host. Several Devices may
// share a PCI function (K200 power domains): they then have the same BDF.
type Device struct {
	// Index is N in /dev/xpuN and /proc/xpu/devN.
	Index int `json:"index"`
	// Minor is the node's minor number (not N: Kunlun2 uses 2*slot).
	Minor  uint32 `json:"minor"`
	Family Family `json:"family"`
	// Model is the board model (P800, R200, K200 ...); it is not written
	// anywhere for Kunlun2/3, whose procfs only names the family.
	Model string `json:"model"`
	// DeviceName is the procfs info DeviceName (family name, or K100/K200).
	DeviceName string `json:"deviceName"`
	// BDF is the PCI address, e.g. 0000:01:00.0.
	BDF string `json:"bdf"`
	// PCIParent is the path below /sys/devices that holds the PCI function
	// directory, e.g. "pci0000:00" or "pci0000:00/0000:00:01.0".
	PCIParent       string `json:"pciParent"`
	VendorID        uint16 `json:"vendorID"`
	DeviceID        uint16 `json:"deviceID"`
	SubsystemVendor uint16 `json:"subsystemVendor"`
	SubsystemDevice uint16 `json:"subsystemDevice"`
	NUMANode        int    `json:"numaNode"`
	// Serial is the DeviceSN procfs shows (Kunlun2/3: first 16 characters
	// of the board SN; Kunlun1: lowercase hex).
	Serial string `json:"serial"`
	// State is the procfs state (RUNNING, ERROR, LOWPOWER ...).
	State    string   `json:"state"`
	Function Function `json:"function"`
	// PhysFn is the BDF of the physical function of a VF.
	PhysFn string `json:"physFn,omitempty"`
	// TotalVFs is sriov_totalvfs of a PF; 0 means no SR-IOV capability.
	TotalVFs int `json:"totalVFs,omitempty"`
	// MemoryMiB and L3MiB feed mminfo (Kunlun2/3).
	MemoryMiB int `json:"memoryMiB,omitempty"`
	L3MiB     int `json:"l3MiB,omitempty"`
	// FirmwareVersion and CPLDVersion feed the Kunlun1 info file.
	FirmwareVersion string `json:"firmwareVersion,omitempty"`
	CPLDVersion     int    `json:"cpldVersion,omitempty"`
	// ErrInfo is the errinfo content; empty means the family's "no error".
	ErrInfo string `json:"errInfo,omitempty"`
	// Resets feeds /proc/xpu/devN/reset_count.
	Resets int `json:"resets,omitempty"`
	// NoNode, NoProc and NoSysfs leave out this device's /dev node, its
	// /proc/xpu/devN directory or all of its sysfs entries.
	NoNode  bool `json:"noNode,omitempty"`
	NoProc  bool `json:"noProc,omitempty"`
	NoSysfs bool `json:"noSysfs,omitempty"`
}

// ProbeError is one line of /proc/xpu/probe_error: a PCI function that failed
// probe and therefore has no node.
type ProbeError struct {
	BDF     string `json:"bdf"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (p ProbeError) line() string {
	return fmt.Sprintf("%s 0 1 (nil) %d %s", p.BDF, p.Code, p.Message)
}

// Library is one driver library file.
type Library struct {
	// Dir is where the file lives: a directory of the XRE install
	// ("lib64", "so"; empty means "lib64") or, when absolute, an in-tree
	// system directory such as /lib/x86_64-linux-gnu, whose libraries are
	// listed in the tree's ld.so.cache.
	Dir string `json:"dir,omitempty"`
	// File is the file name; SONAME the DT_SONAME written into it.
	File   string `json:"file"`
	SONAME string `json:"soname"`
	// DevLinks are development symlinks (libxpurt.so -> libxpurt.so.1).
	DevLinks []string `json:"devLinks,omitempty"`
}

// Host describes a fake Kunlun host. The shape constructors return one; tweak
// the fields before calling Build.
type Host struct {
	// Shape names the constructor that produced the description.
	Shape string `json:"shape"`
	// Layout is the driver generation (empty: LayoutXRE4).
	Layout Layout `json:"layout,omitempty"`
	// Arch is the machine (a Go architecture name: amd64, arm64) the
	// host's libraries and programs are built for, with a cross compiler
	// when it is not the machine the tests run on; empty means that one.
	Arch string `json:"arch,omitempty"`
	// Major is the xpu char major (dynamic on 4.x hosts, 195 on 5.x).
	Major uint32 `json:"major"`
	// CtrlMinor is the minor of /dev/xpuctrl; 0 means CtrlMinor (128).
	CtrlMinor uint32 `json:"ctrlMinor,omitempty"`
	// DriverVersion is the kernel module's version (/proc/xpu/version).
	DriverVersion string `json:"driverVersion"`
	// XREVersion names the user-space install /usr/local/xpu-<XREVersion>.
	XREVersion string `json:"xreVersion"`
	// NodeMode, NodeUID and NodeGID are the device nodes' permissions and
	// owner (0666 with the vendor udev rule, 0660 root:root without).
	NodeMode os.FileMode `json:"nodeMode"`
	NodeUID  uint32      `json:"nodeUID"`
	NodeGID  uint32      `json:"nodeGID"`
	// UdevRule writes /etc/udev/rules.d/99-kunlun.rules.
	UdevRule bool `json:"udevRule"`
	// LoadJiffies feeds /proc/xpu/load_time.
	LoadJiffies uint64       `json:"loadJiffies"`
	Devices     []Device     `json:"devices"`
	ProbeErrors []ProbeError `json:"probeErrors,omitempty"`
	Libraries   []Library    `json:"libraries"`

	// NodeClass is the class the driver registers its nodes in: their
	// class devices live under their PCI functions at
	// /sys/devices/<PCIParent>/<bdf>/<NodeClass>/xpuN, linked from
	// /sys/class/<NodeClass>/xpuN, and xpuctrl at
	// /sys/devices/virtual/<NodeClass>/xpuctrl. Empty means the layout's:
	// "xpu" on 4.x, none on 5.x (P800XRE5: nothing under /sys leads to a
	// node).
	NodeClass string `json:"nodeClass,omitempty"`
	// SysDevChar writes the kernel's /sys/dev/char/MAJ:MIN link to every
	// class device (Documentation/ABI/stable/sysfs-dev).
	SysDevChar bool `json:"sysDevChar,omitempty"`

	// Knobs that leave parts out.
	NoCtrl   bool `json:"noCtrl,omitempty"`   // no /dev/xpuctrl node
	NoNodes  bool `json:"noNodes,omitempty"`  // module loaded, no /dev/xpu* nodes at all
	NoSysfs  bool `json:"noSysfs,omitempty"`  // no R/sys at all
	NoProcfs bool `json:"noProcfs,omitempty"` // no R/proc at all
	NoDriver bool `json:"noDriver,omitempty"` // no XRE files (usr/local, ld.so.*)
	NoXPUSMI bool `json:"noXpuSmi,omitempty"` // XRE without xpu_smi / xpu-smi
}

// XRE5 reports whether the host has the driver 5.x layout.
func (h *Host) XRE5() bool { return h.Layout == LayoutXRE5 }

// nodeClass is the class of the host's class devices, empty for none.
func (h *Host) nodeClass() string {
	switch {
	case h.NodeClass != "":
		return h.NodeClass
	case h.XRE5():
		return ""
	}
	return "xpu"
}

// ctrlMinor is the minor of the host's /dev/xpuctrl.
func (h *Host) ctrlMinor() uint32 {
	if h.CtrlMinor == 0 {
		return CtrlMinor
	}
	return h.CtrlMinor
}

// libDir is the in-tree directory of a library of the XRE install xre.
func (l Library) libDir(xre string) string {
	switch {
	case l.Dir == "":
		return xre + "/lib64"
	case strings.HasPrefix(l.Dir, "/"):
		return l.Dir
	}
	return xre + "/" + l.Dir
}
