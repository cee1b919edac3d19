// Package deviceplugin is the Kubernetes device plugin of xpu-device-plugin:
// it advertises the compute XPUs that package discover finds as extended
// resources through the kubelet's device plugin API (v1beta1) and answers
// Allocate with CDI device names of the configured kind, which the container
// engine resolves against the spec xpu-cdi wrote. Under the mixed partition
// strategy (the default) whole cards are one resource (default
// baidu.com/xpu) and each SR-IOV partition size another
// (baidu.com/xpu-48gb, baidu.com/xpu-24gb), each with its own socket,
// registration and ListAndWatch (Resource); under single every device is
// the one resource, and the plugin refuses to start unless all are of one
// size (partitions.go).
//
// What it guarantees: device IDs are index names (the N of /dev/xpuN), the
// same names the spec gives; a device is Unhealthy while the driver reports an
// error state for it or, for the cdi-* strategies, while no CDI spec names
// it; the device list is re-sent on every change; Allocate never answers for
// an ID it does not advertise as healthy, and each resource answers only
// for its own devices. A partition size that appears while the plugin runs
// is registered then; one that disappears keeps its registration with an
// empty list (pods asking for it stay pending instead of failing). It
// re-registers when the kubelet restarts (which removes the plugin's
// sockets) and removes its sockets when it stops.
//
// What it does not do: it writes no CDI spec (xpu-cdi generate or refresh
// does), adds no device nodes, mounts or environment of its own for the cdi-*
// strategies, and shares an XPU between containers only by time-slicing
// (Config.Sharing, per resource: each XPU advertised several times as N::k,
// see sharing.go), with no memory or fault isolation; memory isolation is
// what partitions give.
package deviceplugin
