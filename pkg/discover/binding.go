package discover

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
)

// bindingSource checks the devices' PCI functions against the PCI
// functions the kunlun driver binds (/sys/bus/pci/drivers/kunlun/<BDF>):
// a function the driver binds is a Kunlun device whatever its IDs (so
// never a "not Kunlun" problem), a device whose function the driver does
// not bind is reported, and, when every device was looked at (no
// WithIndices), so are the bound functions no node leads to.
type bindingSource struct {
	sys *sysfs
	// all is false with WithIndices: the devices not selected are not
	// on the host, so a bound function without one says nothing.
	all bool
	// seen records the bound functions no node led to.
	seen *pciSeen
}

var _ source = (*bindingSource)(nil)

// newBindingSource returns the Source reading the kunlun driver's bindings
// below the dev root of sys.
func newBindingSource(sys *sysfs, all bool, seen *pciSeen) source {
	return &bindingSource{sys: sys, all: all, seen: seen}
}

const driverKunlun = "/sys/bus/pci/drivers/kunlun"

func (s *bindingSource) Discover(h *Host) error {
	drvDir := s.sys.hostPath(driverKunlun)
	bound := map[string]bool{} // with all, every function the driver binds
	var unbound []string
	if s.all {
		entries, err := s.sys.root.readDir(driverKunlun)
		if err != nil {
			s.noBindings(h, drvDir, err)
			return nil
		}
		for _, e := range entries {
			if IsPCIAddress(e.Name()) {
				bound[e.Name()] = true
			}
		}
	} else if _, err := s.sys.root.stat(driverKunlun); err != nil {
		s.noBindings(h, drvDir, err)
		return nil
	}
	has := map[string]bool{}
	for _, d := range h.Devices {
		if addr := d.Address(); addr != "" {
			has[addr] = true
		}
		if d.PCI == nil {
			continue
		}
		addr := d.PCI.Address
		isBound := bound[addr]
		if !s.all {
			_, err := s.sys.root.lstat(driverKunlun + "/" + addr)
			isBound = err == nil
		}
		switch {
		case isBound:
		case d.PCI.VendorID != vendorKunlun:
			d.problemf("sysfs: PCI function %s has vendor 0x%04x, not Kunlun (0x%04x), and is not bound to the kunlun driver (no %s/%s): the node is not a Kunlun XPU's", addr, d.PCI.VendorID, vendorKunlun, drvDir, addr)
		default:
			d.problemf("sysfs: PCI function %s is not bound to the kunlun driver (no %s/%s)", addr, drvDir, addr)
		}
	}
	for addr := range bound {
		if !has[addr] {
			unbound = append(unbound, addr)
		}
	}
	slices.Sort(unbound)
	s.seen.boundNoNode = unbound
	if len(unbound) == 0 {
		return nil
	}
	for _, d := range h.Devices {
		if d.Address() == "" {
			// A device no source mapped may be one of them: mergeSource
			// names the functions in its note.
			return nil
		}
	}
	h.warnf("PCI functions bound to the kunlun driver with no /dev/xpuN node: %s; they are not offered (do the nodes exist? udev rules?)", strings.Join(unbound, ", "))
	return nil
}

// noBindings records that the driver's bindings cannot be read: the vendor
// ID is all that tells a Kunlun function.
func (s *bindingSource) noBindings(h *Host, drvDir string, err error) {
	for _, d := range h.Devices {
		if d.PCI != nil && d.PCI.VendorID != vendorKunlun {
			d.problemf("sysfs: %s has PCI vendor 0x%04x, not Kunlun (0x%04x)", d.PCI.Address, d.PCI.VendorID, vendorKunlun)
		}
	}
	mapped := slices.ContainsFunc(h.Devices, func(d *Device) bool { return d.PCI != nil })
	switch {
	case !mapped:
	case errors.Is(err, fs.ErrNotExist):
		h.notef("%s not present: whether the devices' PCI functions are bound to the kunlun driver is not checked", drvDir)
	default:
		h.warnf("%s not readable (%v): whether the devices' PCI functions are bound to the kunlun driver is not checked", drvDir, trimPathError(err, drvDir))
	}
}
