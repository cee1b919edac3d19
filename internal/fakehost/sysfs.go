package fakehost

import (
	"fmt"
	"os"
	"strings"
)

func fsMode(perm int) os.FileMode { return os.FileMode(perm) }

// pciDir is the in-tree sysfs directory of a device's PCI function.
func pciDir(d Device) string {
	return "/sys/devices/" + strings.Trim(d.PCIParent, "/") + "/" + d.BDF
}

const (
	sysDriverKunlun = "/sys/bus/pci/drivers/kunlun"
	sysModuleKunlun = "/sys/module/kunlun"
	sysModulePeer   = "/sys/module/kunlun_peermem"
	pciClassAccel   = 0x120000 // processing accelerator
)

// device returns the first device at bdf.
func (b *builder) device(bdf string) (Device, bool) {
	for _, d := range b.h.Devices {
		if d.BDF == bdf {
			return d, true
		}
	}
	return Device{}, false
}

func hex16(v uint16) string { return fmt.Sprintf("0x%04x\n", v) }

// buildSysfs writes the xpu class, the PCI functions, the kunlun PCI driver
// and the module.
func (b *builder) buildSysfs() error {
	if b.h.NoSysfs {
		return nil
	}
	h := b.h
	class := h.nodeClass()
	dirs := []string{"/sys/class/" + class, sysDriverKunlun, "/sys/bus/pci/devices"}
	if class == "" {
		dirs = dirs[1:] // no class on driver 5.x (P800XRE5)
	}
	for _, dir := range dirs {
		if err := b.mkdir(dir); err != nil {
			return err
		}
	}
	if !h.XRE5() {
		if err := b.writeText(sysModuleKunlun+"/version", h.DriverVersion+"\n", 0o444); err != nil {
			return err
		}
	} else if err := b.writeText(sysModulePeer+"/initstate", "live\n", 0o444); err != nil {
		return err
	}
	if err := b.writeText(sysModuleKunlun+"/initstate", "live\n", 0o444); err != nil {
		return err
	}
	if err := b.symlink(sysModuleKunlun, sysDriverKunlun+"/module"); err != nil {
		return err
	}
	if err := b.symlink(sysDriverKunlun, sysModuleKunlun+"/drivers/pci:kunlun"); err != nil {
		return err
	}
	if !h.NoCtrl && class != "" {
		ctrl := "/sys/devices/virtual/" + class + "/xpuctrl"
		if err := b.classDevice(class, ctrl, "xpuctrl", h.ctrlMinor(), ""); err != nil {
			return err
		}
	}
	byBDF := map[string]Device{}
	vfs := map[string][]Device{}
	for _, d := range h.Devices {
		if d.Function == FunctionVF {
			vfs[d.PhysFn] = append(vfs[d.PhysFn], d)
		}
	}
	for _, d := range h.Devices {
		if d.NoSysfs {
			continue
		}
		if _, done := byBDF[d.BDF]; !done {
			byBDF[d.BDF] = d
			if err := b.pciFunction(d, vfs[d.BDF]); err != nil {
				return err
			}
		}
		if err := b.nodeClassDevice(d); err != nil {
			return err
		}
	}
	return nil
}

// nodeClassDevice writes the class device of d's node under its PCI
// function, when the host's driver registers its nodes in a class.
func (b *builder) nodeClassDevice(d Device) error {
	class := b.h.nodeClass()
	if class == "" {
		return nil
	}
	fn := pciDir(d)
	name := fmt.Sprintf("xpu%d", d.Index)
	return b.classDevice(class, fn+"/"+class+"/"+name, name, d.Minor, fn)
}

// classDevice writes one class device directory, its class link and, with
// Host.SysDevChar, its /sys/dev/char link.
func (b *builder) classDevice(class, dir, name string, minor uint32, pciFn string) error {
	h := b.h
	files := []struct{ name, text string }{
		{"dev", fmt.Sprintf("%d:%d\n", h.Major, minor)},
		{"uevent", fmt.Sprintf("MAJOR=%d\nMINOR=%d\nDEVNAME=%s\nDEVMODE=0666\n", h.Major, minor, name)},
	}
	for _, f := range files {
		if err := b.writeText(dir+"/"+f.name, f.text, 0o444); err != nil {
			return err
		}
	}
	classDir := "/sys/class/" + class
	if err := b.symlink(classDir, dir+"/subsystem"); err != nil {
		return err
	}
	if pciFn != "" {
		if err := b.symlink(pciFn, dir+"/device"); err != nil {
			return err
		}
	}
	if h.SysDevChar {
		if err := b.symlink(dir, devCharPath(h.Major, minor)); err != nil {
			return err
		}
	}
	return b.symlink(dir, classDir+"/"+name)
}

// devCharPath is the kernel's entry for a char device number.
func devCharPath(major, minor uint32) string {
	return fmt.Sprintf("/sys/dev/char/%d:%d", major, minor)
}

// pciFunction writes a PCI function directory with its IDs, NUMA node,
// driver binding and SR-IOV links.
func (b *builder) pciFunction(d Device, vfs []Device) error {
	fn := pciDir(d)
	slotID := fmt.Sprintf("pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X", d.VendorID, d.DeviceID,
		d.SubsystemVendor, d.SubsystemDevice, pciClassAccel>>16, (pciClassAccel>>8)&0xff, pciClassAccel&0xff)
	files := []struct{ name, text string }{
		{"vendor", hex16(d.VendorID)},
		{"device", hex16(d.DeviceID)},
		{"subsystem_vendor", hex16(d.SubsystemVendor)},
		{"subsystem_device", hex16(d.SubsystemDevice)},
		{"class", fmt.Sprintf("0x%06x\n", pciClassAccel)},
		{"numa_node", fmt.Sprintf("%d\n", d.NUMANode)},
		{"uevent", fmt.Sprintf("DRIVER=kunlun\nPCI_CLASS=%X\nPCI_ID=%04X:%04X\nPCI_SUBSYS_ID=%04X:%04X\nPCI_SLOT_NAME=%s\nMODALIAS=%s\n",
			pciClassAccel, d.VendorID, d.DeviceID, d.SubsystemVendor, d.SubsystemDevice, d.BDF, slotID)},
		{"modalias", slotID + "\n"},
	}
	if d.Function == FunctionPF && d.TotalVFs > 0 {
		files = append(files,
			struct{ name, text string }{"sriov_totalvfs", fmt.Sprintf("%d\n", d.TotalVFs)},
			struct{ name, text string }{"sriov_numvfs", fmt.Sprintf("%d\n", len(vfs))},
		)
	}
	for _, f := range files {
		// The kernel's modes: sriov_numvfs is its one attribute here an
		// owner may write (DEVICE_ATTR_RW, 0644), the others are 0444.
		mode := os.FileMode(0o444)
		if f.name == "sriov_numvfs" {
			mode = 0o644
		}
		if err := b.writeText(fn+"/"+f.name, f.text, mode); err != nil {
			return err
		}
	}
	links := [][2]string{
		{sysDriverKunlun, fn + "/driver"},
		{"/sys/bus/pci", fn + "/subsystem"},
		{fn, "/sys/bus/pci/devices/" + d.BDF},
		{fn, sysDriverKunlun + "/" + d.BDF},
	}
	for k, vf := range vfs {
		if !vf.NoSysfs {
			links = append(links, virtfnLink(d, k, vf))
		}
	}
	if d.Function == FunctionVF {
		if pf, ok := b.device(d.PhysFn); ok && !pf.NoSysfs {
			links = append(links, [2]string{pciDir(pf), fn + "/physfn"})
		}
	}
	for _, l := range links {
		if err := b.symlink(l[0], l[1]); err != nil {
			return err
		}
	}
	return nil
}

// virtfnLink is the PF's link to its VF number k: target, link.
func virtfnLink(pf Device, k int, vf Device) [2]string {
	return [2]string{pciDir(vf), fmt.Sprintf("%s/virtfn%d", pciDir(pf), k)}
}
