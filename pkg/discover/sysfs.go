package discover

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
)

// sysfsSource adds PCI facts from /sys below the dev root.
type sysfsSource struct {
	devRoot string
}

var _ source = (*sysfsSource)(nil)

// newSysfsSource returns the Source reading /sys/class/xpu below devRoot.
func newSysfsSource(devRoot string) source {
	return &sysfsSource{devRoot: devRoot}
}

// IsPCIAddress reports whether s is a full PCI address in the kernel's
// lower-case form dddd:bb:dd.f, such as 0000:3b:00.0. (No regexp: this
// package is linked into the runtime shim, whose start-up time counts.)
func IsPCIAddress(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' || s[11] < '0' || s[11] > '7' {
		return false
	}
	for i, c := range []byte(s[:10]) {
		if i == 4 || i == 7 {
			continue
		}
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func (s *sysfsSource) Discover(h *Host) error {
	classDir := filepath.Join(s.devRoot, "sys", "class", "xpu")
	if _, err := os.Stat(classDir); err != nil {
		// Driver 5.x (P800) has no xpu class: optional, one note for the
		// host, none per device.
		if errors.Is(err, fs.ErrNotExist) {
			h.noClassXPU = true
			h.notef("%s not present (optional: driver 5.x does not create it): devices get no PCI facts (model, NUMA node, SR-IOV) from sysfs", classDir)
		} else {
			h.warnf("%s not readable (%v): devices get no PCI facts", classDir, trimPathError(err, classDir))
		}
		for _, d := range h.Devices {
			d.Model = modelFor(nil, d.Family, "")
		}
		if h.noProcXPU && h.noClassXPU && len(h.Devices) > 0 {
			h.notef("no PCI address for %s: neither /proc/xpu/devN/info nor /sys/class/xpu/xpuN exists to map a node to its PCI function, and xpu-cdi does not guess one; the devices are named by index only",
				nodeList(h.Devices))
		}
		return nil
	}
	models := map[string]string{} // PF address -> model, for VFs
	for _, d := range h.Devices {
		s.device(d)
	}
	for _, d := range h.Devices {
		if d.PCI != nil && d.PCI.Function == FunctionPF {
			d.Model = modelFor(d.PCI, d.Family, "")
			models[d.PCI.Address] = d.Model
		}
	}
	for _, d := range h.Devices {
		switch {
		case d.PCI == nil:
			d.Model = modelFor(nil, d.Family, "")
		case d.PCI.Function == FunctionVF:
			parent, ok := models[d.PCI.Parent]
			if !ok {
				parent = s.parentModel(d.PCI.Parent)
			}
			d.Model = modelFor(d.PCI, d.Family, parent)
		case d.PCI.Function != FunctionPF:
			d.Model = modelFor(d.PCI, d.Family, "")
		}
		if d.PCI != nil && d.ProcAddress != "" && d.ProcAddress != d.PCI.Address {
			d.problemf("procfs says PCI address %s, sysfs says %s", d.ProcAddress, d.PCI.Address)
		}
	}
	return nil
}

// pciAddressOf returns the PCI address the sysfs link name of dir (a class
// device's "device", a VF's "physfn") leads to. The kernel writes these
// links relative and ending in the target's name, which for a PCI function
// is its address, so one readlink is enough; a link of another form is
// resolved inside the dev root.
func (s *sysfsSource) pciAddressOf(dir *attrDir, name string) (string, error) {
	target, err := dir.readlink(name)
	if err != nil {
		return "", err
	}
	if base := filepath.Base(target); IsPCIAddress(base) {
		return base, nil
	}
	rel, err := filepath.Rel(s.devRoot, filepath.Join(dir.path, name))
	if err != nil {
		return "", err
	}
	resolved, err := securejoin.SecureJoin(s.devRoot, rel)
	if err != nil {
		return "", err
	}
	return filepath.Base(resolved), nil
}

func (s *sysfsSource) device(d *Device) {
	classPath := filepath.Join(s.devRoot, "sys", "class", "xpu", "xpu"+strconv.Itoa(d.Index))
	class, err := openAttrDir(classPath)
	if err != nil {
		d.problemf("sysfs: %s", trimPathError(err, classPath))
		return
	}
	defer class.close()
	addr, err := s.pciAddressOf(class, "device")
	if err != nil {
		d.problemf("sysfs: %s", trimPathError(err, filepath.Join(classPath, "device")))
		return
	}
	if mm, err := class.read("dev"); err == nil {
		if want := fmt.Sprintf("%d:%d", d.Node.Major, d.Node.Minor); strings.TrimSpace(string(mm)) != want {
			d.problemf("sysfs: %s/dev says %s but %s is %s: the node is stale (driver reloaded?)", classPath, strings.TrimSpace(string(mm)), d.Node.HostPath, want)
		}
	}
	if !IsPCIAddress(addr) {
		d.problemf("sysfs: %s/device does not lead to a PCI function (%s)", classPath, addr)
		return
	}
	// The function's directory is opened through the device link: sysfs
	// links are relative, so it resolves below the dev root.
	fn, err := openAttrDir(filepath.Join(classPath, "device"))
	if err != nil {
		d.problemf("sysfs: %v", err)
		return
	}
	defer fn.close()
	p, err := readPCI(fn)
	if err != nil {
		d.problemf("sysfs: %v", err)
		return
	}
	p.Address = addr
	if p.VendorID != vendorKunlun {
		d.problemf("sysfs: %s has PCI vendor 0x%04x, not Kunlun (0x%04x)", addr, p.VendorID, vendorKunlun)
	}
	switch parent, err := s.pciAddressOf(fn, "physfn"); {
	case err == nil:
		p.Function = FunctionVF
		if IsPCIAddress(parent) {
			p.Parent = parent
		} else {
			d.problemf("sysfs: %s/physfn does not name a PCI function (%s)", fn.path, parent)
		}
	case errors.Is(err, fs.ErrNotExist):
		p.Function = FunctionPF
		if n, err := fn.read("sriov_numvfs"); err == nil {
			p.NumVFs, _ = strconv.Atoi(strings.TrimSpace(string(n)))
		}
	default:
		d.problemf("sysfs: %v", err)
	}
	d.PCI = p
	if p.Function == FunctionPF && p.NumVFs > 0 {
		d.Compute = false
	}
}

// parentModel reads the IDs of a PF that has no node of its own.
func (s *sysfsSource) parentModel(addr string) string {
	if !IsPCIAddress(addr) {
		return ""
	}
	fn, err := openAttrDir(filepath.Join(s.devRoot, "sys", "bus", "pci", "devices", addr))
	if err != nil {
		return ""
	}
	defer fn.close()
	p, err := readPCI(fn)
	if err != nil {
		return ""
	}
	return modelFor(p, "", "")
}

// readPCI reads the ID files of a PCI function directory.
func readPCI(dir *attrDir) (*PCI, error) {
	p := &PCI{NUMANode: -1, Function: FunctionUnknown}
	ids := []struct {
		file string
		dst  *uint16
	}{
		{"vendor", &p.VendorID},
		{"device", &p.DeviceID},
		{"subsystem_vendor", &p.SubsystemVendor},
		{"subsystem_device", &p.SubsystemDevice},
	}
	for _, id := range ids {
		v, err := readHex16(dir, id.file)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && (id.file == "subsystem_vendor" || id.file == "subsystem_device") {
				continue
			}
			return nil, err
		}
		*id.dst = v
	}
	if n, err := dir.read("numa_node"); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(n))); err == nil {
			p.NUMANode = v
		}
	}
	return p, nil
}

func readHex16(dir *attrDir, name string) (uint16, error) {
	data, err := dir.read(name)
	if err != nil {
		return 0, fmt.Errorf("reading PCI ID: %w", err)
	}
	s := strings.TrimSpace(string(data))
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 16)
	if err != nil {
		return 0, fmt.Errorf("%s/%s: %q is not a 16-bit hex ID", dir.path, name, s)
	}
	return uint16(v), nil
}
