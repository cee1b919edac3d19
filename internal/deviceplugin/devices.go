package deviceplugin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// unhealthyStates are the procfs states (/proc/xpu/devN/state) in which a
// device cannot run work: the error states of both generations (Kunlun2
// ERROR, INVALID; Kunlun1 ERROR, UNKNOWN, PROBE_ERROR) and the states of a
// device being reset or recovered (IN_RESET, RECOVERING). RUNNING, the Kunlun1
// power states (LOWPOWER, PAUSE), an unreadable state and states this table
// does not know are Healthy: the driver has not reported an error.
var unhealthyStates = map[string]bool{
	"ERROR":       true,
	"INVALID":     true,
	"UNKNOWN":     true,
	"PROBE_ERROR": true,
	"IN_RESET":    true,
	"RECOVERING":  true,
}

// HealthOf returns the kubelet health of a device whose driver reports state.
func HealthOf(state string) string {
	if unhealthyStates[strings.ToUpper(strings.TrimSpace(state))] {
		return pluginapi.Unhealthy
	}
	return pluginapi.Healthy
}

// Device is one advertised XPU.
type Device struct {
	// ID is the index name (the N of /dev/xpuN), also the CDI device name.
	ID    string
	Index int
	// NUMANode is -1 when sysfs does not know it.
	NUMANode int
	// State is the procfs state, empty when unreadable.
	State  string
	Health string
	// Reason says why the device is Unhealthy (empty when Healthy).
	Reason string
}

// devicesOf returns the compute devices of h, sorted by index, with their
// health from the procfs state.
func devicesOf(h *discover.Host) []Device {
	compute := h.ComputeDevices()
	out := make([]Device, 0, len(compute))
	for _, d := range compute {
		dev := Device{ID: strconv.Itoa(d.Index), Index: d.Index, NUMANode: -1, State: d.State, Health: HealthOf(d.State)}
		if d.PCI != nil {
			dev.NUMANode = d.PCI.NUMANode
		}
		if dev.Health == pluginapi.Unhealthy {
			dev.Reason = fmt.Sprintf("the driver reports state %s", d.State)
		}
		out = append(out, dev)
	}
	slices.SortFunc(out, func(a, b Device) int { return a.Index - b.Index })
	return out
}

// markUnhealthy sets every healthy device whose ID is not in ok Unhealthy
// with reason.
func markUnhealthy(devs []Device, ok func(id string) bool, reason string) {
	for i := range devs {
		if devs[i].Health == pluginapi.Healthy && !ok(devs[i].ID) {
			devs[i].Health = pluginapi.Unhealthy
			devs[i].Reason = reason
		}
	}
}

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
