package fakehost

import "fmt"

// Shape names accepted by ShapeByName (and the xpu-fakehost command).
const (
	ShapeP800x8       = "p800x8"
	ShapeP800XRE5     = "p800-xre5"
	ShapeP800Sysfs    = "p800-sysfs"
	ShapeP800SRIOV    = "p800-sriov"
	ShapeP800Quarters = "p800-quarters"
	ShapeP800x8SRIOV  = "p800x8-sriov"
	ShapeR200SRIOV    = "r200-sriov"
	ShapeK200         = "k200"
	ShapeDegraded     = "degraded"
	ShapeScaled       = "scaled"
	ShapeR200Arm64    = "r200-arm64"
)

// Shapes lists the valid shape names.
func Shapes() []string {
	return []string{ShapeP800x8, ShapeP800XRE5, ShapeP800Sysfs, ShapeP800SRIOV, ShapeP800Quarters, ShapeP800x8SRIOV, ShapeR200SRIOV, ShapeK200, ShapeDegraded, ShapeScaled, ShapeR200Arm64}
}

// ShapeByName returns the named shape; devices and libraries are only used by
// "scaled".
func ShapeByName(name string, devices, libraries int) (Host, error) {
	switch name {
	case ShapeP800x8:
		return P800x8(), nil
	case ShapeP800XRE5:
		return P800XRE5(), nil
	case ShapeP800Sysfs:
		return P800Sysfs(), nil
	case ShapeP800SRIOV:
		return P800SRIOV(), nil
	case ShapeP800Quarters:
		return P800Quarters(), nil
	case ShapeP800x8SRIOV:
		return P800x8SRIOV(), nil
	case ShapeR200SRIOV:
		return R200SRIOV(), nil
	case ShapeK200:
		return K200(), nil
	case ShapeDegraded:
		return Degraded(), nil
	case ShapeR200Arm64:
		return R200Arm64(), nil
	case ShapeScaled:
		if devices < 0 || libraries < 0 {
			return Host{}, fmt.Errorf("scaled shape: devices (%d) and libraries (%d) must not be negative", devices, libraries)
		}
		return Scaled(devices, libraries), nil
	default:
		return Host{}, fmt.Errorf("unknown shape %q: valid shapes are %v", name, Shapes())
	}
}

// Driver versions used by the shapes.
const (
	DriverVersionKunlun2 = "4.33.0"
	DriverVersionP800    = "5.0.21.21"
	// XREVersionP800 is the version of the XRE 5 install of P800XRE5, as
	// in the public reports' /usr/local/xpu -> /usr/local/xpu-5.0.21.47.
	XREVersionP800 = "5.0.21.47"
)

// XRE5Libraries is what the public reports show of an XRE 5 install: in
// so/, libxpurt.so.2 (with its libxpurt.so link), libxpuml.so.1 and the
// CUDA-compatible layers libcuda.so.1 and libcudart.so*; in the system
// library directory, libxpunvidia-ml.so.1, a link to a versioned file.
func XRE5Libraries(version string) []Library {
	return []Library{
		{Dir: "so", File: "libxpurt.so.2", SONAME: "libxpurt.so.2", DevLinks: []string{"libxpurt.so"}},
		{Dir: "so", File: "libxpuml.so.1", SONAME: "libxpuml.so.1"},
		{Dir: "so", File: "libcuda.so.1", SONAME: "libcuda.so.1"},
		{Dir: "so", File: "libcudart.so.12", SONAME: "libcudart.so.12", DevLinks: []string{"libcudart.so"}},
		{Dir: SystemLibDir, File: "libxpunvidia-ml.so." + version, SONAME: "libxpunvidia-ml.so.1"},
	}
}

// CoreLibraries is the standard XRE lib64 content: libxpurt and libxpuml
// with their development links, and the other user libraries.
func CoreLibraries() []Library {
	return []Library{
		{File: "libxpurt.so.1", SONAME: "libxpurt.so.1", DevLinks: []string{"libxpurt.so"}},
		{File: "libxpuml.so.1", SONAME: "libxpuml.so.1", DevLinks: []string{"libxpuml.so"}},
		{File: "libpcida.so", SONAME: "libpcida.so"},
		{File: "libxpuapi.so", SONAME: "libxpuapi.so"},
		{File: "libbkcl.so", SONAME: "libbkcl.so"},
		{File: "libxft.so", SONAME: "libxft.so"},
	}
}

// ScaledLibraries returns n library files: the core set first, then
// libxpuextNNNN.so.1 files.
func ScaledLibraries(n int) []Library {
	core := CoreLibraries()
	if n <= len(core) {
		return core[:n]
	}
	libs := core
	for i := 0; len(libs) < n; i++ {
		name := fmt.Sprintf("libxpuext%04d.so.1", i)
		libs = append(libs, Library{File: name, SONAME: name})
	}
	return libs
}

func kunlun2Serial(i int) string {
	return fmt.Sprintf("02K00Y6217V%05d", 9+i)
}

func p800Serial(i int) string {
	return fmt.Sprintf("02P00A5240V%05d", 101+i)
}

func p800Device(i, numa int, bdf, parent string) Device {
	return Device{
		Index: i, Minor: slotMinor(i), Family: Kunlun3, Model: "P800", DeviceName: "Kunlun3",
		BDF: bdf, PCIParent: parent,
		VendorID: VendorKunlun, DeviceID: DeviceIDP800, SubsystemVendor: VendorKunlun, SubsystemDevice: 0x0001,
		NUMANode: numa, Serial: p800Serial(i), State: "RUNNING", Function: FunctionPF,
		MemoryMiB: 98304, L3MiB: 96,
	}
}

// slotMinor is the minor of the node of the device in probe slot s: 2*s, with
// 128 (xpuctrl) skipped for hosts with more than 64 devices.
func slotMinor(s int) uint32 {
	m := uint32(2 * s)
	if m >= CtrlMinor {
		m += 2
	}
	return m
}

// P800x8 is an 8-card P800 (Kunlun3) OAM box, driver 5.0.21.x, nodes 0666
// through the vendor udev rule, cards 0-3 on NUMA node 0 behind root ports of
// pci0000:00 and cards 4-7 on NUMA node 1 behind pci0000:80.
func P800x8() Host {
	h := Host{
		Shape: ShapeP800x8, Major: DefaultMajor,
		DriverVersion: DriverVersionP800, XREVersion: DriverVersionP800,
		NodeMode: 0o666, UdevRule: true, LoadJiffies: 4294968231,
		Libraries: CoreLibraries(),
	}
	for i := range 8 {
		numa, bus, hb := 0, 0x01+i, 0x00
		if i >= 4 {
			numa, bus, hb = 1, 0x81+i-4, 0x80
		}
		parent := fmt.Sprintf("pci0000:%02x/0000:%02x:%02x.0", hb, hb, 1+i%4)
		h.Devices = append(h.Devices, p800Device(i, numa, fmt.Sprintf("0000:%02x:00.0", bus), parent))
	}
	return h
}

// P800XRE5 is an 8-card P800 OAM box as the public reports of driver/XRE
// 5.x hosts show it (reference "Driver 5.x and P800"): nodes /dev/xpu0..7
// char 195:N and /dev/xpuctrl 195:255, mode 0666; modules kunlun and
// kunlun_peermem; /proc/kunlun/devN but no /proc/xpu; PCI functions
// 0x1d22:0x3688 bound to kunlun but no /sys/class/xpu (so nothing maps a
// node to its PCI function); XRE 5.0.21.47 with its libraries in so/
// (not in ld.so.cache), libxpunvidia-ml.so.1 in /lib/x86_64-linux-gnu and
// a dynamically linked xpu-smi in /usr/local/bin.
func P800XRE5() Host {
	h := Host{
		Shape: ShapeP800XRE5, Layout: LayoutXRE5, Major: MajorXRE5, CtrlMinor: CtrlMinorXRE5,
		DriverVersion: XREVersionP800, XREVersion: XREVersionP800,
		NodeMode: 0o666, UdevRule: true, LoadJiffies: 4294968231,
		Libraries: XRE5Libraries(XREVersionP800),
	}
	for i := range 8 {
		numa, bus, hb := 0, 0x01+i, 0x00
		if i >= 4 {
			numa, bus, hb = 1, 0x81+i-4, 0x80
		}
		parent := fmt.Sprintf("pci0000:%02x/0000:%02x:%02x.0", hb, hb, 1+i%4)
		d := p800Device(i, numa, fmt.Sprintf("0000:%02x:00.0", bus), parent)
		d.Minor = uint32(i)
		h.Devices = append(h.Devices, d)
	}
	return h
}

func r200PF(i int, slot int, bdf string, numa int) Device {
	return Device{
		Index: i, Minor: slotMinor(slot), Family: Kunlun2, Model: "R200", DeviceName: "Kunlun2",
		BDF: bdf, PCIParent: "pci0000:00",
		VendorID: VendorKunlun, DeviceID: DeviceIDPF, SubsystemVendor: 0x0002, SubsystemDevice: 0x0001,
		NUMANode: numa, Serial: kunlun2Serial(slot), State: "RUNNING", Function: FunctionPF,
		TotalVFs: 3, MemoryMiB: 16384, L3MiB: 63,
	}
}

// R200SRIOV is a Kunlun2 host with two R200 PFs: the first (xpu0,
// 0000:3b:00.0) has its 3 VFs enabled (xpu2..xpu4, 0000:3b:00.1-3, 0x3685,
// 5 GiB each), the second (xpu1, 0000:5e:00.0) has none. Driver 4.33.0.
func R200SRIOV() Host {
	h := Host{
		Shape: ShapeR200SRIOV, Major: DefaultMajor,
		DriverVersion: DriverVersionKunlun2, XREVersion: DriverVersionKunlun2,
		NodeMode: 0o666, UdevRule: true, LoadJiffies: 4294968231,
		Libraries: CoreLibraries(),
	}
	pf0 := r200PF(0, 0, "0000:3b:00.0", 0)
	pf1 := r200PF(1, 1, "0000:5e:00.0", 1)
	h.Devices = append(h.Devices, pf0, pf1)
	for k := range 3 {
		vf := mustVF(pf0, k, 5120)
		vf.Index = 2 + k
		vf.Minor = slotMinor(2 + k)
		h.Devices = append(h.Devices, vf)
	}
	return h
}

// vfOf is VF number k (from 0) of the PF pf with memoryMiB of memory, as
// the kernel and the driver show it (the one description of a VF, for the
// shapes and the fake SR-IOV kernel alike): at the PF's routing ID plus
// 1+k (0000:03:00.0's VFs are 0000:03:00.1, .2 ...), the PF's IDs, serial,
// family and NUMA node, Kunlun2's VF device ID for a Kunlun2 PF (a P800
// VF keeps the PF's: none other is public). Index and Minor are the
// caller's.
func vfOf(pf Device, k, memoryMiB int) (Device, error) {
	var domain, bus, dev, fn int
	if _, err := fmt.Sscanf(pf.BDF, "%04x:%02x:%02x.%d", &domain, &bus, &dev, &fn); err != nil || dev > 31 || fn > 7 {
		return Device{}, fmt.Errorf("fake host: PF address %q is not DDDD:BB:DD.F", pf.BDF)
	}
	rid := (dev<<3 | fn) + 1 + k
	if k < 0 || rid > 0xff {
		return Device{}, fmt.Errorf("fake host: VF %d of %s is beyond its bus", k, pf.BDF)
	}
	vf := pf
	vf.BDF = fmt.Sprintf("%04x:%02x:%02x.%d", domain, bus, rid>>3, rid&7)
	if pf.DeviceID == DeviceIDPF {
		vf.DeviceID = DeviceIDVF
	}
	vf.Function = FunctionVF
	vf.PhysFn = pf.BDF
	vf.TotalVFs = 0
	vf.MemoryMiB = memoryMiB
	vf.Resets, vf.ErrInfo = 0, ""
	vf.NoNode, vf.NoProc, vf.NoSysfs = false, false, false
	return vf, nil
}

// mustVF is vfOf for the shapes' fixed addresses.
func mustVF(pf Device, k, memoryMiB int) Device {
	vf, err := vfOf(pf, k, memoryMiB)
	if err != nil {
		panic(err)
	}
	return vf
}

// K200 is one Kunlun1 K200 card (0000:01:00.0, 0x3684, subsystem
// 0000:0000) with two power domains: xpu0 (minor 0, RUNNING) and xpu1
// (minor 1, LOWPOWER) on the same PCI function. Driver 4.33.0.
func K200() Host {
	h := Host{
		Shape: ShapeK200, Major: DefaultMajor,
		DriverVersion: DriverVersionKunlun2, XREVersion: DriverVersionKunlun2,
		NodeMode: 0o666, UdevRule: true, LoadJiffies: 4294968231,
		Libraries: CoreLibraries(),
	}
	for d, state := range []string{"RUNNING", "LOWPOWER"} {
		h.Devices = append(h.Devices, Device{
			Index: d, Minor: uint32(d), Family: Kunlun1, Model: "K200", DeviceName: "K200",
			BDF: "0000:01:00.0", PCIParent: "pci0000:00",
			VendorID: VendorKunlun, DeviceID: DeviceIDPF,
			Serial: "22f", State: state, Function: FunctionPF,
			FirmwareVersion: "0001.0000.0020", CPLDVersion: 0x21,
		})
	}
	return h
}

// Degraded is a Kunlun2 host where things went wrong: the third card
// (0000:5e:00.0) failed probe, so the nodes are xpu0, xpu1, xpu3 and
// probe_error names it; xpu0 has the unknown device ID 0x3699; xpu1 has no
// /proc/xpu/dev1; xpu3 is in ERROR state and has no sysfs entries; there is
// no udev rule (nodes 0660 root:root), no xpu-smi and only libxpurt and
// libxpuapi are installed.
func Degraded() Host {
	h := Host{
		Shape: ShapeDegraded, Major: DefaultMajor,
		DriverVersion: DriverVersionKunlun2, XREVersion: DriverVersionKunlun2,
		NodeMode: 0o660, LoadJiffies: 4294968231,
		NoXPUSMI: true,
	}
	x0 := r200PF(0, 0, "0000:3b:00.0", 0)
	x0.DeviceID = DeviceIDUnknown
	x0.SubsystemDevice = 0x0009
	x0.Model = ""
	x0.TotalVFs = 0
	x1 := r200PF(1, 1, "0000:3c:00.0", 0)
	x1.NoProc = true
	x3 := r200PF(3, 3, "0000:5f:00.0", 1)
	x3.State = "ERROR"
	x3.ErrInfo = "Device heartbeat lost"
	x3.NoSysfs = true
	h.Devices = []Device{x0, x1, x3}
	h.ProbeErrors = []ProbeError{{BDF: "0000:5e:00.0", Code: 804, Message: "Error init device"}}
	core := CoreLibraries()
	h.Libraries = []Library{core[0], core[3]}
	return h
}

// Scaled is a P800 host with the given number of devices and driver library
// files, for benchmarks. Devices spread over PCI domains of 128 buses each
// and two NUMA nodes (first half 0, second half 1).
func Scaled(devices, libraries int) Host {
	h := Host{
		Shape: ShapeScaled, Major: DefaultMajor,
		DriverVersion: DriverVersionP800, XREVersion: DriverVersionP800,
		NodeMode: 0o666, UdevRule: true, LoadJiffies: 4294968231,
		Libraries: ScaledLibraries(libraries),
	}
	for i := range devices {
		domain, bus := i/128, 1+i%128
		numa := 0
		if 2*i >= devices && devices > 1 {
			numa = 1
		}
		h.Devices = append(h.Devices, p800Device(i, numa,
			fmt.Sprintf("%04x:%02x:00.0", domain, bus), fmt.Sprintf("pci%04x:00", domain)))
	}
	return h
}

// R200Arm64 is an aarch64 server (Kunpeng/Phytium class, as the Paddle
// Lite and Kylin V10 aarch64 recipes use) with two Kunlun2 R200 cards
// without SR-IOV: xpu0 on 0000:01:00.0 behind pci0000:00 (NUMA 0), xpu1 on
// 0000:81:00.0 behind pci0000:80 (NUMA 1), driver 4.33.0, nodes 0666 with
// the udev rule. The XRE 4 libraries in /usr/local/xpu-4.33.0/lib64,
// xpu_smi and the test programs are aarch64 ELF files (built with
// aarch64-linux-gnu-gcc on other machines), and ld.so.cache carries the
// aarch64 flags (0x0a03).
func R200Arm64() Host {
	h := Host{
		Shape: ShapeR200Arm64, Arch: "arm64", Major: DefaultMajor,
		DriverVersion: DriverVersionKunlun2, XREVersion: DriverVersionKunlun2,
		NodeMode: 0o666, UdevRule: true, LoadJiffies: 4294968231,
		Libraries: CoreLibraries(),
	}
	for i, bdf := range []string{"0000:01:00.0", "0000:81:00.0"} {
		d := r200PF(i, i, bdf, i)
		d.PCIParent = fmt.Sprintf("pci0000:%02x", 0x80*i)
		d.TotalVFs = 0
		h.Devices = append(h.Devices, d)
	}
	return h
}
