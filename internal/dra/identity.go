package dra

import (
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
)

// identity is what makes a published device the same device: its PCI
// function, the card it is a partition of, and its memory. The rest of
// its attributes (health, versions) may change without the allocation
// being wrong.
type identity struct {
	pci, parent, memory string
}

func identityOf(d resourceapi.Device) identity {
	str := func(name resourceapi.QualifiedName) string {
		if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}
	id := identity{pci: str(deviceattribute.StandardDeviceAttributePCIBusID), parent: str(AttrParentBusID)}
	if c, ok := d.Capacity[CapacityMemory]; ok {
		id.memory = c.Value.String()
	}
	return id
}

func (id identity) String() string {
	s := "PCI " + id.pci
	if id.pci == "" {
		s = "no PCI function"
	}
	if id.parent != "" {
		s += ", a partition of " + id.parent
	} else {
		s += ", a whole card"
	}
	if id.memory != "" {
		s += ", " + id.memory
	}
	return s
}

// renumbered records, in the slice's devices after a refresh, the names
// whose identity differs from the one published before (into changedAt,
// at now); a name new or gone is not recorded.
func renumbered(prev, next []resourceapi.Device, changedAt map[string]time.Time, now time.Time) {
	before := make(map[string]identity, len(prev))
	for _, p := range prev {
		before[p.Name] = identityOf(p)
	}
	for _, n := range next {
		if id, ok := before[n.Name]; ok && id != identityOf(n) {
			changedAt[n.Name] = now
		}
	}
}

// checkIdentity refuses to prepare name as dev (the device the scan finds
// under the name now) when it is not the device the claim was allocated:
// the slice published now offers another identity under the name (a
// layout was applied since the last refresh), or the name changed
// identity after the allocation's time (when the API server records it).
// A name this driver has not published yet (a Prepare before the first
// refresh after a restart) is not checked.
func (d *Driver) checkIdentity(name string, dev resourceapi.Device, alloc *resourceapi.AllocationResult) error {
	now := identityOf(dev)
	for _, p := range d.api {
		if p.Name != name {
			continue
		}
		if was := identityOf(p); was != now {
			return fmt.Errorf("%w: the slice offers %s under this name, the node has %s now (its cards were laid out again): the claim must be allocated again", ErrDeviceChanged, was, now)
		}
		break
	}
	if at, ok := d.changedAt[name]; ok && alloc.AllocationTimestamp != nil && alloc.AllocationTimestamp.Time.Before(at) {
		return fmt.Errorf("%w: allocated at %s, but the name stands for %s since %s (its cards were laid out again): the claim must be allocated again",
			ErrDeviceChanged, alloc.AllocationTimestamp.UTC().Format(time.RFC3339), now, at.UTC().Format(time.RFC3339))
	}
	return nil
}
