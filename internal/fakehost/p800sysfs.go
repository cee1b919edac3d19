package fakehost

// p800SysfsOrder gives, for each /dev/xpuN of P800Sysfs, the card's place
// in PCI address order (0 = 0000:01:00.0 ... 7 = 0000:84:00.0): the driver
// numbers its nodes in probe order, which need not follow the addresses,
// and here mixes the two NUMA nodes too.
var p800SysfsOrder = []int{5, 2, 7, 0, 4, 1, 6, 3}

// P800SysfsClass is the class P800Sysfs registers its nodes in. The 5.x
// driver's class name is not public; what matters is that it is not xpu.
const P800SysfsClass = "kunlun"

// P800Sysfs (p800-sysfs) is the P800XRE5 box as the kernel's generic
// device links show it: the driver registers its nodes in a class that is
// not xpu (/sys/class/kunlun), each under its PCI function
// (/sys/devices/<PCIParent>/<bdf>/kunlun/xpuN, xpuctrl under
// /sys/devices/virtual/kunlun), and the kernel links every char device
// number to its class device, /sys/dev/char/195:N (udev creates /dev/xpuN
// from these). The nodes are not in PCI address order: /dev/xpu0 is
// 0000:82:00.0 on NUMA node 1, /dev/xpu3 is 0000:01:00.0 (p800SysfsOrder).
// Everything else (no /proc/xpu, no /sys/class/xpu, XRE 5 in so/, 195:N
// nodes, PCI functions bound to kunlun) is P800XRE5's.
func P800Sysfs() Host {
	h := P800XRE5()
	h.Shape = ShapeP800Sysfs
	h.NodeClass = P800SysfsClass
	h.SysDevChar = true
	byAddress := h.Devices
	h.Devices = make([]Device, len(byAddress))
	for n, place := range p800SysfsOrder {
		d := byAddress[place]
		d.Index, d.Minor, d.Serial = n, uint32(n), p800Serial(n)
		h.Devices[n] = d
	}
	return h
}

// P800SRIOV (p800-sriov) is a driver 5.x P800 OAM box with SR-IOV on, as
// the public xpu-smi reports show it (reference "P800 partitions"): the
// card's PF at 0000:03:00.0 (/dev/xpu0, 98304 MiB, sriov_totalvfs 4) has 2
// VFs enabled at the next functions of its bus, 0000:03:00.1 and .2
// (/dev/xpu1 and /dev/xpu2, P800 VF, 49152 MiB each: 1/2 card), with the
// PF's device ID (no P800 VF ID is public: the physfn link tells a VF);
// the second card, 0000:83:00.0 (/dev/xpu3, NUMA node 1, sriov_totalvfs
// 4), has none. Nodes
// are found through /sys/dev/char as on P800Sysfs; no /proc/xpu, so no
// procfs memory: the sizes are the fake's record of the truth.
func P800SRIOV() Host { return p800SRIOV(ShapeP800SRIOV, 2) }

// P800Quarters (p800-quarters) is P800SRIOV's box with its first card cut
// into quarters: the PF 0000:03:00.0 (/dev/xpu0) has 4 VFs, 0000:03:00.1
// to .4 (/dev/xpu1 to /dev/xpu4, P800 VF, 24576 MiB each: 1/4 card); the
// second card, 0000:83:00.0 (/dev/xpu5, NUMA node 1), is whole.
func P800Quarters() Host { return p800SRIOV(ShapeP800Quarters, 4) }

// P800x8SRIOV (p800x8-sriov) is P800XRE5's 8-card box found through
// /sys/dev/char as p800-sysfs, with SR-IOV on every card (sriov_totalvfs 4)
// and every card whole: 0000:01:00.0 to 0000:04:00.0 (NUMA 0) and
// 0000:81:00.0 to 0000:84:00.0 (NUMA 1) as /dev/xpu0 to /dev/xpu7. It is
// the box where the driver's handle budget (32: every PF and every VF takes
// one) shows: all=2 (8 + 16 = 24 handles) and six cards in quarters (32)
// fit, all=4 (8 + 32 = 40) does not.
func P800x8SRIOV() Host {
	h := P800XRE5()
	h.Shape = ShapeP800x8SRIOV
	h.NodeClass = P800SysfsClass
	h.SysDevChar = true
	for i := range h.Devices {
		h.Devices[i].TotalVFs = 4
	}
	return h
}

// p800SRIOV is the driver 5.x box of P800SRIOV whose first card has vfs VFs
// (indexes 1..vfs, minor = index), the second card the next index.
func p800SRIOV(shape string, vfs int) Host {
	h := P800XRE5()
	h.Shape = shape
	h.NodeClass = P800SysfsClass
	h.SysDevChar = true
	pf := p800Device(0, 0, "0000:03:00.0", "pci0000:00/0000:00:02.0")
	pf.TotalVFs = 4
	h.Devices = []Device{pf}
	for k := range vfs {
		vf := mustVF(pf, k, pf.MemoryMiB/vfs)
		vf.Index = 1 + k
		h.Devices = append(h.Devices, vf)
	}
	second := p800Device(1+vfs, 1, "0000:83:00.0", "pci0000:80/0000:80:02.0")
	second.TotalVFs = 4
	h.Devices = append(h.Devices, second)
	for i := range h.Devices {
		h.Devices[i].Minor = uint32(h.Devices[i].Index)
	}
	return h
}
