package cdispec

import (
	"path"
	"strconv"

	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// This file is the one place where the project's own values become CDI
// container edits.

// mountOptions are the options of every driver file bind mount.
var mountOptions = []string{"ro", "nosuid", "nodev", "rbind", "rprivate"}

// hookEnv is the environment of every hook: explicit, so that a hook never
// inherits the runtime's (or the image's) environment.
var hookEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}

// DeviceEnvPrefix starts the per-device variable XPU_CDI_DEVICE_<N>=<PCI
// address>: one key per device, so that any combination of requested devices
// sets every key of every device it got, and none is overwritten.
const DeviceEnvPrefix = "XPU_CDI_DEVICE_"

func deviceNode(n *discover.Node) *specs.DeviceNode {
	mode := n.Mode.Perm()
	uid, gid := n.UID, n.GID
	return &specs.DeviceNode{
		Path:     n.Path,
		HostPath: n.HostPath,
		Type:     "c",
		Major:    int64(n.Major),
		Minor:    int64(n.Minor),
		FileMode: &mode,
		UID:      &uid,
		GID:      &gid,
	}
}

func deviceEnv(d *discover.Device) string {
	addr := d.Address()
	if addr == "" {
		addr = "unknown"
	}
	return DeviceEnvPrefix + strconv.Itoa(d.Index) + "=" + addr
}

// deviceEdits are the edits of one device: its node and its own variable.
func deviceEdits(devs ...*discover.Device) specs.ContainerEdits {
	var e specs.ContainerEdits
	for _, d := range devs {
		e.DeviceNodes = append(e.DeviceNodes, deviceNode(&d.Node))
		e.Env = append(e.Env, deviceEnv(d))
	}
	return e
}

func bindMount(hostPath, containerPath string) *specs.Mount {
	return &specs.Mount{
		HostPath:      hostPath,
		ContainerPath: containerPath,
		Type:          "bind",
		Options:       append([]string(nil), mountOptions...),
	}
}

// fileMounts mounts each driver file at its container path and at its
// AlsoAt paths (a system library's versioned name); a tool is also mounted
// under each of its alias names so no hook is needed to reach it.
func fileMounts(files []discover.DriverFile) []*specs.Mount {
	var out []*specs.Mount
	for _, f := range files {
		out = append(out, bindMount(f.HostPath, f.Path))
		for _, p := range f.AlsoAt {
			out = append(out, bindMount(f.HostPath, p))
		}
		if f.Kind == discover.KindTool {
			for _, alias := range f.Links {
				out = append(out, bindMount(f.HostPath, path.Join(path.Dir(f.Path), alias)))
			}
		}
	}
	return out
}

// ociHook is the hook run at stage: program path, the whole argv args
// (args[0] the program name) and hookEnv.
func ociHook(stage, path string, args []string) *specs.Hook {
	return &specs.Hook{
		HookName: stage,
		Path:     path,
		Args:     append([]string(nil), args...),
		Env:      append([]string(nil), hookEnv...),
	}
}
