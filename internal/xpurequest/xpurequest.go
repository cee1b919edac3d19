// Package xpurequest names the two ways a container asks
// xpu-container-runtime for XPUs outside CDI: the XPU_VISIBLE_DEVICES
// variable and the device plugin's volume-mounts answer. The device plugin
// answers with them and the shim (internal/shim) reads them; this package
// is their one home, so that neither imports the other. It holds names
// only: who may use them is the shim's decision (docs/security.md).
package xpurequest

// VisibleDevicesEnv is the variable a container asks for XPUs with, and
// the one the shim sets to the indices a container got. Only privileged
// containers may ask with it.
const VisibleDevicesEnv = "XPU_VISIBLE_DEVICES"

// MountDir is where the device plugin's volume-mounts strategy mounts
// MountSource read-only, once per allocated device, named by the last path
// component: /var/run/xpu-container-devices/3 asks for device 3 of the
// kind. A pod with a hostPath volume can make the same mount, so the shim
// takes it from a pod only under accept-device-plugin-mounts.
const (
	MountDir    = "/var/run/xpu-container-devices"
	MountSource = "/dev/null"
)
