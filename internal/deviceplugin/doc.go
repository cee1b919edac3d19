// Package deviceplugin is the Kubernetes device plugin of xpu-device-plugin:
// it advertises the compute XPUs that package discover finds as an extended
// resource (default baidu.com/xpu) through the kubelet's device plugin API
// (v1beta1) and answers Allocate with CDI device names of the configured kind,
// which the container engine resolves against the spec xpu-cdi wrote.
//
// What it guarantees: device IDs are index names (the N of /dev/xpuN), the
// same names the spec gives; a device is Unhealthy while the driver reports an
// error state for it or, for the cdi-* strategies, while no CDI spec names
// it; the device list is re-sent on every change; Allocate never answers for
// an ID it does not advertise as healthy. It re-registers when the kubelet
// restarts (which removes the plugin's socket) and removes its socket when it
// stops.
//
// What it does not do: it writes no CDI spec (xpu-cdi generate or refresh
// does), adds no device nodes, mounts or environment of its own for the cdi-*
// strategies, and shares an XPU between containers only by time-slicing
// (Config.Sharing: each XPU advertised several times as N::k, see sharing.go),
// with no memory or fault isolation.
package deviceplugin
