package cdicompat

import "tags.cncf.io/container-device-interface/specs-go"

// Members are the members of an OCI spec that applying some edits changes.
type Members struct {
	Env           bool // process.env
	User          bool // process.user (additional GIDs)
	Mounts        bool // mounts
	Hooks         bool // hooks
	Devices       bool // linux.devices
	CgroupDevices bool // linux.resources.devices
	NetDevices    bool // linux.netDevices
	IntelRdt      bool // linux.intelRdt
}

// EditedMembers returns the members of an OCI spec that applying e changes.
//
// Mirrors (library v1.1.2) (*ContainerEdits).Apply: env entries go to
// process.env; device nodes to linux.devices and, with their cgroup rule, to
// linux.resources.devices; mounts to mounts (sorted by container path);
// hooks to hooks; intelRdt to linux.intelRdt; additional GIDs to
// process.user; net devices to linux.netDevices. Apply also creates the
// process and linux objects it writes into, which are parents of these.
func EditedMembers(e *specs.ContainerEdits) Members {
	if e == nil {
		return Members{}
	}
	return Members{
		Env:           len(e.Env) > 0,
		User:          len(e.AdditionalGIDs) > 0,
		Mounts:        len(e.Mounts) > 0,
		Hooks:         len(e.Hooks) > 0,
		Devices:       len(e.DeviceNodes) > 0,
		CgroupDevices: len(e.DeviceNodes) > 0,
		NetDevices:    len(e.NetDevices) > 0,
		IntelRdt:      e.IntelRdt != nil,
	}
}
