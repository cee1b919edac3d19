package cdicompat

import "tags.cncf.io/container-device-interface/specs-go"

// Member names a member of an OCI spec by its JSON path ("process.env",
// "linux.resources.devices").
type Member = string

// applied are the members of an OCI spec that ContainerEdits.Apply may
// change, each with whether some edits change it, in the order
// EditedMembers returns them.
//
// Mirrors (library v1.1.2) (*ContainerEdits).Apply: env entries go to
// process.env; device nodes to linux.devices and, with their cgroup rule, to
// linux.resources.devices; mounts to mounts (sorted by container path);
// hooks to hooks; intelRdt to linux.intelRdt; additional GIDs to
// process.user; net devices to linux.netDevices. Apply also creates the
// process and linux objects it writes into, which are parents of these.
var applied = []struct {
	member  Member
	changes func(*specs.ContainerEdits) bool
}{
	{"process.env", func(e *specs.ContainerEdits) bool { return len(e.Env) > 0 }},
	{"linux.devices", func(e *specs.ContainerEdits) bool { return len(e.DeviceNodes) > 0 }},
	{"linux.resources.devices", func(e *specs.ContainerEdits) bool { return len(e.DeviceNodes) > 0 }},
	{"mounts", func(e *specs.ContainerEdits) bool { return len(e.Mounts) > 0 }},
	{"hooks", func(e *specs.ContainerEdits) bool { return len(e.Hooks) > 0 }},
	{"linux.intelRdt", func(e *specs.ContainerEdits) bool { return e.IntelRdt != nil }},
	{"process.user", func(e *specs.ContainerEdits) bool { return len(e.AdditionalGIDs) > 0 }},
	{"linux.netDevices", func(e *specs.ContainerEdits) bool { return len(e.NetDevices) > 0 }},
}

// EditableMembers returns every member of an OCI spec that applying some
// edits may change.
func EditableMembers() []Member {
	out := make([]Member, len(applied))
	for i, a := range applied {
		out[i] = a.member
	}
	return out
}

// EditedMembers returns the members of an OCI spec that applying e changes.
func EditedMembers(e *specs.ContainerEdits) []Member {
	if e == nil {
		return nil
	}
	var out []Member
	for _, a := range applied {
		if a.changes(e) {
			out = append(out, a.member)
		}
	}
	return out
}
