package discover

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ErrNoDevices is returned when no /dev/xpuN node exists under the dev root.
var ErrNoDevices = errors.New("no Kunlun XPU found")

// ErrNoComputeDevice is returned by Host.CheckUsable when device nodes exist
// but none of them can be given to a container.
var ErrNoComputeDevice = errors.New("no Kunlun XPU can be given to containers")

// ErrNoControlNode is returned by Host.CheckUsable when /dev/xpuctrl is missing.
var ErrNoControlNode = errors.New("control node /dev/xpuctrl not found")

// A source adds what it can read about the host to h. It returns an error
// only when discovery cannot go on at all; partial knowledge is recorded as
// problems on the devices or warnings on the host.
type source interface {
	Discover(h *Host) error
}

// sourceFunc adapts a function to Source.
type sourceFunc func(h *Host) error

// Discover implements Source.
func (f sourceFunc) Discover(h *Host) error { return f(h) }

// chain returns a Source that runs srcs in order and stops at the first error.
func chain(srcs ...source) source {
	return sourceFunc(func(h *Host) error {
		for _, s := range srcs {
			if err := s.Discover(h); err != nil {
				return err
			}
		}
		return nil
	})
}

// Discover reads the host described by opts. It fails with ErrNoDevices when
// there is no device node at all; everything else that cannot be read ends up
// in the returned Host's problems, warnings and notes, which Discover does
// not log: the caller prints each once.
func Discover(opts ...Option) (*Host, error) {
	o := newOptions(opts)
	if o.archErr != nil {
		return nil, o.archErr
	}
	devRoot, err := filepath.Abs(o.devRoot)
	if err != nil {
		return nil, fmt.Errorf("dev root %q: %w", o.devRoot, err)
	}
	driverRoot, err := filepath.Abs(o.driverRoot)
	if err != nil {
		return nil, fmt.Errorf("driver root %q: %w", o.driverRoot, err)
	}
	h := &Host{DevRoot: devRoot, DriverRoot: driverRoot}
	nodes := newNodeSource(devRoot, o.stater)
	if o.indices != nil {
		nodes = newIndexedNodeSource(devRoot, o.stater, o.indices)
	}
	// The node-to-PCI sources in the order they are believed: the
	// kernel's entry for the node's own major:minor first, then the 4.x
	// driver's class by name; bindings and models need what they found.
	root := newHostRoot(devRoot)
	defer root.close()
	sys := newSysfs(root)
	seen := &pciSeen{}
	src := chain(
		nodes,
		newMajorSource(root),
		newProcSource(root, seen),
		newDevCharSource(sys, seen),
		newClassSource(sys, seen),
		newBindingSource(sys, o.indices == nil, seen),
		newMergeSource(sys, seen),
		newDriverSource(driverRoot, o.xreDirs, o.toolPaths, o.log, archFilter(o)),
	)
	if err := src.Discover(h); err != nil {
		return nil, err
	}
	return h, nil
}

// CheckUsable returns an error when the host has device nodes but cannot
// give any of them to a container: no control node, or no compute device
// (every PF has its VFs enabled and no VF node exists).
func (h *Host) CheckUsable() error {
	if h.Control == nil {
		return fmt.Errorf("%w under %s: the kunlun driver creates it together with /dev/xpuN; without it no device is usable", ErrNoControlNode, h.DevRoot)
	}
	if len(h.ComputeDevices()) == 0 {
		return fmt.Errorf("%w under %s: every device found is a physical function with SR-IOV VFs enabled and no VF node exists", ErrNoComputeDevice, h.DevRoot)
	}
	return nil
}

// nodeList names the nodes of devs briefly: /dev/xpu0../dev/xpu7 for a run
// of consecutive indices, else a comma-separated list.
func nodeList(devs []*Device) string {
	first, last := devs[0].Index, devs[len(devs)-1].Index
	if last-first == len(devs)-1 && len(devs) > 2 {
		return fmt.Sprintf("/dev/xpu%d../dev/xpu%d", first, last)
	}
	names := make([]string, len(devs))
	for i, d := range devs {
		names[i] = d.Node.Path
	}
	return strings.Join(names, ", ")
}
