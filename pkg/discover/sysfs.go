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

var _ Source = (*sysfsSource)(nil)

// NewSysfsSource returns the Source reading /sys/class/xpu below devRoot.
func NewSysfsSource(devRoot string) Source {
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
		h.warnf("%s not readable (%v): devices get no PCI facts", classDir, trimPathError(err, classDir))
		for _, d := range h.Devices {
			d.problemf("sysfs: %s missing", classDir)
		}
		return nil
	}
	models := map[string]string{} // PF address -> model, for VFs
	for _, d := range h.Devices {
		s.device(d)
	}
	for _, d := range h.Devices {
		if d.PCI != nil && d.PCI.Function == FunctionPF {
			d.Model = ModelFor(d.PCI, d.Family, "")
			models[d.PCI.Address] = d.Model
		}
	}
	for _, d := range h.Devices {
		switch {
		case d.PCI == nil:
			d.Model = ModelFor(nil, d.Family, "")
		case d.PCI.Function == FunctionVF:
			parent, ok := models[d.PCI.Parent]
			if !ok {
				parent = s.parentModel(d.PCI.Parent)
			}
			d.Model = ModelFor(d.PCI, d.Family, parent)
		case d.PCI.Function != FunctionPF:
			d.Model = ModelFor(d.PCI, d.Family, "")
		}
		if d.PCI != nil && d.ProcAddress != "" && d.ProcAddress != d.PCI.Address {
			d.problemf("procfs says PCI address %s, sysfs says %s", d.ProcAddress, d.PCI.Address)
		}
	}
	return nil
}

// resolve follows symlinks of a path below the dev root without leaving it.
func (s *sysfsSource) resolve(p string) (string, error) {
	return securejoin.SecureJoin(s.devRoot, p)
}

func (s *sysfsSource) device(d *Device) {
	classEntry := "/sys/class/xpu/xpu" + strconv.Itoa(d.Index)
	devLink := filepath.Join(s.devRoot, classEntry, "device")
	if _, err := os.Lstat(devLink); err != nil {
		d.problemf("sysfs: %s", trimPathError(err, devLink))
		return
	}
	devFile := filepath.Join(s.devRoot, classEntry, "dev")
	if mm, err := readTrimmed(devFile); err == nil {
		if want := fmt.Sprintf("%d:%d", d.Node.Major, d.Node.Minor); mm != want {
			d.problemf("sysfs: %s says %s but %s is %s: the node is stale (driver reloaded?)", devFile, mm, d.Node.HostPath, want)
		}
	}
	fnDir, err := s.resolve(filepath.Join(classEntry, "device"))
	if err != nil {
		d.problemf("sysfs: resolving %s: %v", devLink, err)
		return
	}
	addr := filepath.Base(fnDir)
	if !IsPCIAddress(addr) {
		d.problemf("sysfs: %s does not lead to a PCI function (%s)", devLink, fnDir)
		return
	}
	p, err := readPCI(fnDir)
	if err != nil {
		d.problemf("sysfs: %v", err)
		return
	}
	p.Address = addr
	if p.VendorID != VendorKunlun {
		d.problemf("sysfs: %s has PCI vendor 0x%04x, not Kunlun (0x%04x)", fnDir, p.VendorID, VendorKunlun)
	}
	if _, err := os.Lstat(filepath.Join(fnDir, "physfn")); err == nil {
		p.Function = FunctionVF
		parentDir, err := s.resolve(filepath.Join(classEntry, "device", "physfn"))
		if err == nil {
			p.Parent = filepath.Base(parentDir)
		} else {
			d.problemf("sysfs: resolving %s/physfn: %v", fnDir, err)
		}
	} else {
		p.Function = FunctionPF
		if n, err := readTrimmed(filepath.Join(fnDir, "sriov_numvfs")); err == nil {
			p.NumVFs, _ = strconv.Atoi(n)
		}
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
	dir, err := s.resolve("/sys/bus/pci/devices/" + addr)
	if err != nil {
		return ""
	}
	p, err := readPCI(dir)
	if err != nil {
		return ""
	}
	return ModelFor(p, "", "")
}

// readPCI reads the ID files of a PCI function directory.
func readPCI(dir string) (*PCI, error) {
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
		path := filepath.Join(dir, id.file)
		v, err := readHex16(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && (id.file == "subsystem_vendor" || id.file == "subsystem_device") {
				continue
			}
			return nil, err
		}
		*id.dst = v
	}
	if n, err := readTrimmed(filepath.Join(dir, "numa_node")); err == nil {
		if v, err := strconv.Atoi(n); err == nil {
			p.NUMANode = v
		}
	}
	return p, nil
}

func readHex16(path string) (uint16, error) {
	s, err := readTrimmed(path)
	if err != nil {
		return 0, fmt.Errorf("reading PCI ID: %w", err)
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 16)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a 16-bit hex ID", path, s)
	}
	return uint16(v), nil
}
