package cdispec

import (
	"errors"
	"fmt"

	"tags.cncf.io/container-device-interface/specs-go"
)

// ErrNotCharDevice is returned by a NodeLookup for a host node that is not
// a character device.
var ErrNotCharDevice = errors.New("not a character device")

// NodeLookup finds the host's node for a device node of a spec. It returns
// the path the node is known by on the host ("" to leave the node
// unchecked), and its major:minor, or an error saying why the host has no
// such node (ErrNotCharDevice, or one wrapping fs.ErrNotExist when it is
// gone).
type NodeLookup func(n *specs.DeviceNode) (path string, major, minor int64, err error)

// NodeChecker compares the device nodes of a spec with the host's, each
// host path once: the one check of whether a spec is stale, for `xpu-cdi
// validate` (which stats the host paths) and the device plugin (which
// compares with what discovery found).
type NodeChecker struct {
	lookup NodeLookup
	seen   map[string]bool
}

// NewNodeChecker returns a NodeChecker that finds host nodes with lookup.
func NewNodeChecker(lookup NodeLookup) *NodeChecker {
	return &NodeChecker{lookup: lookup, seen: map[string]bool{}}
}

// Check returns one problem per device node of e, not checked before,
// that the host does not have, or has with another major:minor than the
// spec says (a spec written before a driver reload, which may change the
// major); a node whose number the spec leaves out (0:0) only has to exist.
// owner names e in the problems ("spec", "device 0").
func (c *NodeChecker) Check(owner string, e *specs.ContainerEdits) []string {
	var problems []string
	for _, n := range e.DeviceNodes {
		path, major, minor, err := c.lookup(n)
		if path == "" || c.seen[path] {
			continue
		}
		c.seen[path] = true
		switch {
		case errors.Is(err, ErrNotCharDevice):
			problems = append(problems, fmt.Sprintf("%s: %s is not a character device", owner, path))
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: device node %s: %v", owner, path, err))
		case (n.Major != 0 || n.Minor != 0) && (major != n.Major || minor != n.Minor):
			problems = append(problems, fmt.Sprintf("%s: %s is %d:%d on this host but the spec says %d:%d (stale spec: the driver was reloaded?)",
				owner, path, major, minor, n.Major, n.Minor))
		}
	}
	return problems
}

// StaleNodes is Check over the spec-wide edits of spec, then those of each
// device in order.
func StaleNodes(spec *specs.Spec, lookup NodeLookup) []string {
	c := NewNodeChecker(lookup)
	problems := c.Check("spec", &spec.ContainerEdits)
	for i := range spec.Devices {
		problems = append(problems, c.Check("device "+spec.Devices[i].Name, &spec.Devices[i].ContainerEdits)...)
	}
	return problems
}
