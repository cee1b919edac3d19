package discover

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/xpu-cdi/xpu-cdi/internal/lookup"
)

// sysDevices is where the kernel keeps every device directory; a PCI
// function lives below a root complex, /sys/devices/pciDDDD:BB.
const sysDevices = "/sys/devices"

// errNotPCI is wrapped by the errors for a sysfs link that leads somewhere
// else than a PCI function.
var errNotPCI = errors.New("not a PCI function")

// sysfs reads the PCI functions behind device nodes for the sources that
// map a node to its function (devCharSource, classSource) and for the last
// one (mergeSource). Every link is resolved inside the dev root, and only a
// directory below /sys/devices/pciDDDD:BB whose name is a PCI address is
// taken for a PCI function: a link that loops, leads out of /sys/devices or
// to a device of another bus gives an error, never an address.
type sysfs struct {
	devRoot string
	root    hostRoot // devRoot: what is read is opened inside it
	res     *lookup.Resolver
}

// newSysfs returns the sysfs reader of one discovery below the dev root.
func newSysfs(root hostRoot) *sysfs {
	devRoot := root.HostPath("/")
	return &sysfs{devRoot: devRoot, root: root, res: lookup.NewResolver(devRoot)}
}

// pciFunction is a PCI function directory found through a link.
type pciFunction struct {
	// addr is its PCI address, dir its in-root path
	// (/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0), root the root
	// complex it sits below (pci0000:00).
	addr, dir, root string
}

// hostPath is the host path of the in-root path p.
func (s *sysfs) hostPath(p string) string { return filepath.Join(s.devRoot, p) }

// resolve returns the in-root path the in-root path p leads to, with every
// symlink resolved inside the dev root (messages name where a link "leads
// to" by such in-root paths). A path that does not exist is
// returned as far as it resolves; only loops and unreadable links fail.
func (s *sysfs) resolve(p string) (string, error) {
	host, err := s.res.Resolve(p)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return "", fmt.Errorf("%s: symlink loop", s.hostPath(p))
		}
		return "", fmt.Errorf("resolving %s: %w", s.hostPath(p), err)
	}
	if s.devRoot == "/" {
		return host, nil
	}
	rel := strings.TrimPrefix(host, s.devRoot)
	if rel == "" {
		rel = "/"
	}
	return rel, nil
}

// below reports whether the in-root path p is dir or below it, comparing
// whole components.
func below(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// isRootComplex reports whether name is a PCI root complex directory of
// sysfs, pciDDDD:BB (domains may have more than 4 hex digits).
func isRootComplex(name string) bool {
	domain, bus, ok := strings.Cut(strings.TrimPrefix(name, "pci"), ":")
	if !ok || !strings.HasPrefix(name, "pci") || len(domain) < 4 || len(bus) != 2 {
		return false
	}
	for _, c := range []byte(domain + bus) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// functionAt resolves the in-root link path (a class device's "device"
// link) and returns the PCI function it leads to. It fails, wrapping
// errNotPCI, for anything but a path named by a PCI address below
// /sys/devices/pciDDDD:BB; whether that directory exists is left to the
// reader, which opens it anyway.
func (s *sysfs) functionAt(link string) (pciFunction, error) {
	dir, err := s.resolve(link)
	if err != nil {
		return pciFunction{}, err
	}
	rest, ok := strings.CutPrefix(dir, sysDevices+"/")
	root, _, _ := strings.Cut(rest, "/")
	addr := path.Base(dir)
	if ok && isRootComplex(root) && IsPCIAddress(addr) && root != rest {
		return pciFunction{addr: addr, dir: dir, root: root}, nil
	}
	// Only what is not a PCI function costs more syscalls.
	switch _, err := s.root.lstat(link); {
	case errors.Is(err, fs.ErrNotExist):
		return pciFunction{}, fmt.Errorf("%s not found: the device has no parent, %w", s.hostPath(link), errNotPCI)
	case !ok:
		return pciFunction{}, fmt.Errorf("%s leads to %s, outside %s: %w", s.hostPath(link), dir, sysDevices, errNotPCI)
	}
	return pciFunction{}, fmt.Errorf("%s leads to %s: %w", s.hostPath(link), dir, errNotPCI)
}

// read reads what sysfs says about the function fn: its IDs, NUMA node and
// SR-IOV role.
func (s *sysfs) read(fn pciFunction) (*PCI, []string, error) {
	dir, err := s.root.openAttrDir(fn.dir)
	if err != nil {
		return nil, nil, errors.New(trimPathError(err, s.hostPath(fn.dir)))
	}
	defer dir.close()
	p, err := readPCI(dir)
	if err != nil {
		return nil, nil, err
	}
	p.Address, p.PCIeRoot = fn.addr, fn.root
	var problems []string
	switch _, err := dir.readlink("physfn"); {
	case err == nil:
		p.Function = FunctionVF
		// Resolved like the node's own link: the PF is a PCI function
		// below /sys/devices too.
		if pf, err := s.functionAt(fn.dir + "/physfn"); err == nil {
			p.Parent = pf.addr
		} else {
			problems = append(problems, fmt.Sprintf("physfn: %v", err))
		}
	case errors.Is(err, fs.ErrNotExist):
		p.Function = FunctionPF
		// A function without the SR-IOV capability has neither file.
		if n, err := dir.read("sriov_numvfs"); err == nil {
			p.NumVFs = vfCount(n)
			if n, err := dir.read("sriov_totalvfs"); err == nil {
				p.TotalVFs = vfCount(n)
			}
		}
	default:
		problems = append(problems, err.Error())
	}
	return p, problems, nil
}

// attach gives d the PCI function fn, which the sysfs entry from maps its
// node to. The first source to map a device wins; a later one that names
// another function is reported, not followed.
func (s *sysfs) attach(d *Device, from string, fn pciFunction) {
	if d.PCI != nil {
		if d.PCI.Address != fn.addr {
			d.problemf("sysfs: %s leads to PCI function %s, but %s leads to %s; the PCI facts are %s's", from, fn.addr, d.pciFrom, d.PCI.Address, d.PCI.Address)
		}
		return
	}
	p, problems, err := s.read(fn)
	if err != nil {
		d.problemf("sysfs: reading PCI function %s, which %s leads to: %v", fn.addr, from, err)
		return
	}
	for _, pr := range problems {
		d.problemf("sysfs: %s", pr)
	}
	d.PCI, d.pciFrom = p, from
	if p.Function == FunctionPF && p.NumVFs > 0 {
		d.Compute = false
	}
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

// classSource maps /dev/xpuN to its PCI function through the 4.x driver's
// class device /sys/class/xpu/xpuN.
type classSource struct {
	sys  *sysfs
	seen *pciSeen // records a host without /sys/class/xpu
}

var _ source = (*classSource)(nil)

// newClassSource returns the Source reading /sys/class/xpu below the dev
// root of sys.
func newClassSource(sys *sysfs, seen *pciSeen) source {
	return &classSource{sys: sys, seen: seen}
}

func (s *classSource) Discover(h *Host) error {
	classDir := s.sys.hostPath("/sys/class/xpu")
	if _, err := s.sys.root.stat("/sys/class/xpu"); err != nil {
		// Driver 5.x (P800) has no xpu class: optional, one note for the
		// host, none per device.
		if errors.Is(err, fs.ErrNotExist) {
			s.seen.noClassXPU = true
			h.notef("%s not present (optional: driver 5.x does not create it): only %s can lead a node to its PCI function", classDir, s.sys.hostPath("/sys/dev/char"))
		} else {
			h.warnf("%s not readable (%v): devices get no PCI facts from it", classDir, trimPathError(err, classDir))
		}
		return nil
	}
	for _, d := range h.Devices {
		s.device(d)
	}
	return nil
}

func (s *classSource) device(d *Device) {
	class := "/sys/class/xpu/xpu" + strconv.Itoa(d.Index)
	classPath := s.sys.hostPath(class)
	dir, dev, err := s.sys.classDevice(class)
	if err != nil {
		d.problemf("sysfs: %v", err)
		return
	}
	if want := fmt.Sprintf("%d:%d", d.Node.Major, d.Node.Minor); dev != "" && dev != want {
		// The node is not the one the kernel has for xpuN: a stale node
		// (driver reloaded) or another device's; not offered.
		d.problemf("sysfs: %s/dev says %s but %s is %s: the node is stale (driver reloaded?) or another device's; not offered", classPath, dev, d.Node.HostPath, want)
		d.Compute = false
	}
	fn, err := s.sys.functionAt(dir + "/device")
	if err != nil {
		d.problemf("sysfs: %v", err)
		return
	}
	s.sys.attach(d, classPath+"/device", fn)
}

// classDevice resolves the in-root path entry (/sys/class/xpu/xpuN,
// /sys/dev/char/MAJ:MIN) to the class device directory it leads to, below
// /sys/devices, and returns that directory and its dev file (MAJ:MIN,
// empty when unreadable).
func (s *sysfs) classDevice(entry string) (dir, dev string, err error) {
	dir, err = s.resolve(entry)
	if err != nil {
		return "", "", err
	}
	if !below(dir, sysDevices) || dir == sysDevices {
		if _, err := s.root.lstat(entry); err != nil {
			return "", "", errors.New(trimPathError(err, s.hostPath(entry)))
		}
		return "", "", fmt.Errorf("%s leads to %s, outside %s: not a device", s.hostPath(entry), dir, sysDevices)
	}
	mm, err := s.root.readSmall(dir + "/dev")
	if err != nil {
		if err := s.isDir(dir); err != nil {
			return "", "", fmt.Errorf("%s leads to %s, %w", s.hostPath(entry), dir, err)
		}
		return dir, "", nil
	}
	return dir, strings.TrimSpace(string(mm)), nil
}

// isDir returns nil for an existing directory at the in-root path p, else
// an error that reads after "leads to X, ".
func (s *sysfs) isDir(p string) error {
	st, err := s.root.stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("which does not exist")
	case err != nil:
		return err
	case !st.IsDir():
		return errors.New("not a directory")
	}
	return nil
}

// parentPF is what a VF's model and size depend on: its PF's model and
// number of enabled VFs.
type parentPF struct {
	model  string
	numVFs int
}

// parentPF reads the IDs and the VF count of a PF that has no node of its
// own; what cannot be read is left empty.
func (s *sysfs) parentPF(addr string) parentPF {
	if !IsPCIAddress(addr) {
		return parentPF{}
	}
	fn, err := s.functionAt("/sys/bus/pci/devices/" + addr)
	if err != nil {
		return parentPF{}
	}
	dir, err := s.root.openAttrDir(fn.dir)
	if err != nil {
		return parentPF{}
	}
	defer dir.close()
	p, err := readPCI(dir)
	if err != nil {
		return parentPF{}
	}
	pf := parentPF{model: modelFor(p, "", "")}
	if n, err := dir.read("sriov_numvfs"); err == nil {
		pf.numVFs = vfCount(n)
	}
	return pf
}

// maxVFCount is the most VFs a PCI function can have (the SR-IOV
// capability's TotalVFs is 16 bits).
const maxVFCount = 1<<16 - 1

// vfCount reads sriov_numvfs or sriov_totalvfs; what is not a count the
// kernel can write (negative, too large, not a number) is 0, so that a
// crafted tree cannot lower the handles a layout is counted with.
func vfCount(b []byte) int {
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || v < 0 || v > maxVFCount {
		return 0
	}
	return v
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
