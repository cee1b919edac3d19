package discover

import (
	"errors"
	"fmt"
	"io/fs"
)

// devCharSource maps each /dev/xpuN to its PCI function through the
// kernel's entry for the node's own major:minor, /sys/dev/char/MAJ:MIN
// (Documentation/ABI/stable/sysfs-dev): a link to the class device the
// driver registered, whatever its class is called, whose "device" link
// leads to the PCI function when the driver created the node under it.
// udev creates /dev/xpuN from these very entries, so every host whose nodes
// appear by themselves has them; driver 5.x (P800), which has no
// /sys/class/xpu, too.
//
// The node's numbers are the ones stat gave, never derived from N: a node
// left over from an earlier driver load leads to no entry, or to another
// device's, which the entry's dev file then contradicts: such a node is
// not offered (Compute false), since sysfs says it is not the XPU's.
type devCharSource struct {
	sys  *sysfs
	seen *pciSeen // records a host without /sys/dev/char
}

var _ source = (*devCharSource)(nil)

// newDevCharSource returns the Source reading /sys/dev/char below the dev
// root of sys.
func newDevCharSource(sys *sysfs, seen *pciSeen) source {
	return &devCharSource{sys: sys, seen: seen}
}

func (s *devCharSource) Discover(h *Host) error {
	dir := s.sys.hostPath("/sys/dev/char")
	if _, err := s.sys.root.stat("/sys/dev/char"); err != nil {
		// Every kernel since 2.6.27 has it; a tree without it (sysfs not
		// mounted in a container, a hand-made tree) may still have
		// /sys/class/xpu. mergeSource names it when no source maps a node.
		if errors.Is(err, fs.ErrNotExist) {
			s.seen.noDevChar = true
		} else {
			h.warnf("%s not readable (%v): devices get no PCI facts from it", dir, trimPathError(err, dir))
		}
		return nil
	}
	for _, d := range h.Devices {
		s.device(d)
	}
	return nil
}

func (s *devCharSource) device(d *Device) {
	mm := fmt.Sprintf("%d:%d", d.Node.Major, d.Node.Minor)
	entry := "/sys/dev/char/" + mm
	entryPath := s.sys.hostPath(entry)
	dir, dev, err := s.sys.classDevice(entry)
	if err != nil {
		if _, lerr := s.sys.root.lstat(entry); errors.Is(lerr, fs.ErrNotExist) {
			d.problemf("sysfs: %s not found: no char device of the kernel has the number %s of %s (a stale node?); not offered", entryPath, mm, d.Node.HostPath)
			d.Compute = false
			return
		}
		d.problemf("sysfs: %v; no PCI address taken from it", err)
		return
	}
	switch {
	case dev == "":
		d.problemf("sysfs: %s leads to %s, whose dev file is unreadable or empty: not a char device's entry; no PCI address taken from it", entryPath, dir)
		return
	case dev != mm:
		d.problemf("sysfs: %s leads to %s, whose dev file says %q, not %s: not the entry of %s; not offered", entryPath, dir, dev, mm, d.Node.HostPath)
		d.Compute = false
		return
	}
	fn, err := s.sys.functionAt(dir + "/device")
	if err != nil {
		d.problemf("sysfs: %s: %v; no PCI address taken from it", entryPath, err)
		return
	}
	s.sys.attach(d, entryPath, fn)
}
