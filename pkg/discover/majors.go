package discover

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
)

// driverDevicesName is the name under which the Kunlun driver registers
// its char major in /proc/devices: "<major> xpu" (the 4.x driver's
// register_chrdev; the major is dynamic, 243 say). The 5.x driver's nodes
// are 195:N; what it registers is not public.
const driverDevicesName = "xpu"

// majorSource offers only the nodes of the driver's major. /proc/devices
// names the char majors the kernel's drivers registered; a node of another
// major (left over from an earlier driver load, or made with mknod for
// another device: 10:232 is /dev/kvm) is not the driver's, even where its
// sysfs entries agree with its numbers. A device node of another major is
// not offered (a problem, Compute false); a control node of another major
// is not taken (a warning: without /dev/xpuctrl no device is usable).
//
// Where /proc/devices has no xpu line (no /proc in the dev root, or a
// driver that registers under another name), nothing is checked, as
// before the check existed, and a host note says so.
type majorSource struct {
	root hostRoot
}

var _ source = (*majorSource)(nil)

// newMajorSource returns the Source checking the nodes' majors against
// /proc/devices below the dev root.
func newMajorSource(root hostRoot) source { return &majorSource{root: root} }

func (s *majorSource) Discover(h *Host) error {
	devices := s.root.HostPath("/proc/devices")
	data, err := s.root.readSmall("/proc/devices")
	if err != nil {
		why := trimPathError(err, devices)
		if !errors.Is(err, fs.ErrNotExist) {
			why = "not readable: " + why
		}
		h.notef("%s; the device nodes' majors are not checked against the driver's", why)
		return nil
	}
	majors := driverMajors(data)
	if len(majors) == 0 {
		h.notef("%s has no %q char device line; the device nodes' majors are not checked against the driver's", devices, driverDevicesName)
		return nil
	}
	names := make([]string, len(majors))
	for i, m := range majors {
		names[i] = strconv.FormatUint(uint64(m), 10)
	}
	said := fmt.Sprintf("%s names major %s for %s", devices, strings.Join(names, ", "), driverDevicesName)
	for _, d := range h.Devices {
		if !slices.Contains(majors, d.Node.Major) {
			d.problemf("%s is char %d:%d, but %s: not the driver's node; not offered", d.Node.HostPath, d.Node.Major, d.Node.Minor, said)
			d.Compute = false
		}
	}
	if c := h.Control; c != nil && !slices.Contains(majors, c.Major) {
		h.warnf("%s is char %d:%d, but %s: not the driver's control node; ignored", c.HostPath, c.Major, c.Minor, said)
		h.Control = nil
	}
	return nil
}

// driverMajors returns the majors of the "<major> xpu" lines in the
// "Character devices:" part of /proc/devices content, in order, without
// duplicates.
func driverMajors(data []byte) []uint32 {
	var out []uint32
	char := false
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "Character" && f[1] == "devices:":
			char = true
		case len(f) == 2 && f[0] == "Block" && f[1] == "devices:":
			char = false
		case char && len(f) == 2 && f[1] == driverDevicesName:
			if n, err := strconv.ParseUint(f[0], 10, 32); err == nil && !slices.Contains(out, uint32(n)) {
				out = append(out, uint32(n))
			}
		}
	}
	return out
}
