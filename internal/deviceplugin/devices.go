package deviceplugin

import (
	"slices"
	"strconv"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
)

// Device is one advertised XPU: the node model shared with the DRA driver.
type Device = xpunode.Device

// apiDevices converts devs to the kubelet's type.
func apiDevices(devs []Device) []*pluginapi.Device {
	out := make([]*pluginapi.Device, 0, len(devs))
	for _, d := range devs {
		ad := &pluginapi.Device{ID: d.ID, Health: d.Health}
		if d.NUMANode >= 0 {
			ad.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(d.NUMANode)}}}
		}
		out = append(out, ad)
	}
	return out
}

// sameDevices reports whether a and b advertise the same thing to the
// kubelet (IDs, health, topology); reasons and states that do not change the
// health do not count.
func sameDevices(a, b []Device) bool {
	return slices.EqualFunc(a, b, func(x, y Device) bool {
		return x.ID == y.ID && x.Health == y.Health && x.NUMANode == y.NUMANode
	})
}

// describe summarizes devs for the log: "0 (numa 0), 1 (numa 1, Unhealthy: ...)".
func describe(devs []Device) string {
	if len(devs) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(devs))
	for _, d := range devs {
		s := d.ID + " (numa " + strconv.Itoa(d.NUMANode)
		if d.Health != pluginapi.Healthy {
			s += ", " + d.Health + ": " + d.Reason
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, ", ")
}
