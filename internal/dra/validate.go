package dra

import (
	"fmt"
	"slices"
	"sort"
	"unicode/utf8"

	resourceapi "k8s.io/api/resource/v1"
)

// This file makes what the driver publishes acceptable to the API server,
// whatever the host's files say: a slice the API server refuses is not
// published at all, so one bad fact (a long version text, an overflowing
// memory size) would keep the whole node's old slice, taints included.
// The checks are the API's own limits (k8s.io/api/resource/v1 constants);
// the API server's validation stays the judge (see Driver.HandleError).

// validDevice returns dev with every attribute and capacity the API server
// would refuse left out, and one message per fact left out. dev itself is
// not changed.
func validDevice(dev resourceapi.Device) (resourceapi.Device, []string) {
	var warnings []string
	out := *dev.DeepCopy()
	names := make([]string, 0, len(out.Attributes))
	for name := range out.Attributes {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		if why := invalidAttribute(out.Attributes[resourceapi.QualifiedName(name)]); why != "" {
			delete(out.Attributes, resourceapi.QualifiedName(name))
			warnings = append(warnings, fmt.Sprintf("device %s: attribute %s left out: %s", dev.Name, name, why))
		}
	}
	names = names[:0]
	for name := range out.Capacity {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		c := out.Capacity[resourceapi.QualifiedName(name)]
		if c.Value.Sign() < 0 {
			delete(out.Capacity, resourceapi.QualifiedName(name))
			warnings = append(warnings, fmt.Sprintf("device %s: capacity %s left out: %s is negative (an overflowing size in the host's files)", dev.Name, name, c.Value.String()))
		}
	}
	if len(out.Capacity) == 0 {
		out.Capacity = nil
	}
	// The API bounds attributes and capacities together; the driver
	// publishes far fewer, so this only keeps a future attribute from
	// making the slice refused.
	for len(out.Attributes)+len(out.Capacity) > resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice && len(out.Attributes) > 0 {
		last := slices.Max(keys(out.Attributes))
		delete(out.Attributes, last)
		warnings = append(warnings, fmt.Sprintf("device %s: attribute %s left out: more than %d attributes and capacities", dev.Name, last, resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice))
	}
	return out, warnings
}

func keys(m map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) []resourceapi.QualifiedName {
	out := make([]resourceapi.QualifiedName, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// invalidAttribute says why the API server would refuse a, empty when it
// would not. Strings and versions are at most DeviceAttributeMaxValueLength
// bytes of valid UTF-8.
func invalidAttribute(a resourceapi.DeviceAttribute) string {
	kind, v := "string", a.StringValue
	if v == nil {
		kind, v = "version", a.VersionValue
	}
	switch {
	case v == nil:
	case len(*v) > resourceapi.DeviceAttributeMaxValueLength:
		return fmt.Sprintf("the %s value is %d bytes long, more than the %d the API takes", kind, len(*v), resourceapi.DeviceAttributeMaxValueLength)
	case !utf8.ValidString(*v):
		return fmt.Sprintf("the %s value %q is not valid UTF-8", kind, *v)
	}
	return ""
}

// maxDevicesPerSlice is how many of devs one slice may hold: fewer when a
// device is tainted or consumes counters (the API's "advanced features").
func maxDevicesPerSlice(devs []resourceapi.Device) int {
	for _, d := range devs {
		if len(d.Taints) > 0 || len(d.ConsumesCounters) > 0 {
			return resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
		}
	}
	return resourceapi.ResourceSliceMaxDevices
}

// splitDevices cuts devs into the slices of one pool, in order; a node
// without XPU has one empty slice (so that the old one is replaced).
func splitDevices(devs []resourceapi.Device) [][]resourceapi.Device {
	if len(devs) == 0 {
		return [][]resourceapi.Device{{}}
	}
	return slices.Collect(slices.Chunk(devs, maxDevicesPerSlice(devs)))
}
