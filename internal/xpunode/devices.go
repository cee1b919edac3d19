package xpunode

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Health values; they are the kubelet device plugin API's strings, so the
// device plugin passes them through unchanged.
const (
	Healthy   = "Healthy"
	Unhealthy = "Unhealthy"
)

// healthyStates are the procfs states (/proc/xpu/devN/state) in which a
// device can run work: RUNNING (both generations) and the Kunlun1 power
// states (LOWPOWER, PAUSE). Every other value is Unhealthy: the error
// states of both generations (Kunlun2 ERROR, INVALID; Kunlun1 ERROR,
// UNKNOWN, PROBE_ERROR), the states of a device being reset or recovered
// (IN_RESET, RECOVERING), and a value this table does not know, which
// cannot be taken for a working device. No state at all (driver 5.x has no
// /proc/xpu; an unreadable state file is a problem of its own) is Healthy:
// the driver has not reported an error.
var healthyStates = map[string]bool{
	"RUNNING":  true,
	"LOWPOWER": true,
	"PAUSE":    true,
}

// HealthOf returns the health of a device whose driver reports state; only
// its first line counts ("ERROR\n..." is ERROR).
func HealthOf(state string) string {
	if i := strings.IndexAny(state, "\r\n"); i >= 0 {
		state = state[:i]
	}
	state = strings.ToUpper(strings.TrimSpace(state))
	if state == "" || healthyStates[state] {
		return Healthy
	}
	return Unhealthy
}

// Device is one offered XPU.
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
	// XPU is what discovery found.
	XPU *discover.Device
	// Facts are what the node publishes about it (discover.Host.FactsOf):
	// the DRA attributes and capacity, the exporter's labels.
	Facts discover.Facts
}

// DevicesOf returns the compute devices of h, sorted by index, with their
// health from the procfs state.
func DevicesOf(h *discover.Host) []Device {
	compute := h.ComputeDevices()
	out := make([]Device, 0, len(compute))
	for _, d := range compute {
		dev := Device{ID: strconv.Itoa(d.Index), Index: d.Index, NUMANode: -1, State: d.State, Health: HealthOf(d.State), XPU: d, Facts: h.FactsOf(d)}
		if d.PCI != nil {
			dev.NUMANode = d.PCI.NUMANode
		}
		if dev.Health == Unhealthy {
			dev.Reason = fmt.Sprintf("the driver reports state %s", d.State)
		}
		out = append(out, dev)
	}
	slices.SortFunc(out, func(a, b Device) int { return a.Index - b.Index })
	return out
}

// MarkUnhealthy sets every healthy device whose ID is not in ok Unhealthy
// with reason.
func MarkUnhealthy(devs []Device, ok func(id string) bool, reason string) {
	for i := range devs {
		if devs[i].Health == Healthy && !ok(devs[i].ID) {
			devs[i].Health = Unhealthy
			devs[i].Reason = reason
		}
	}
}

// Unnamed returns, in order, the IDs of devs that names (the device names
// the node's specs offer) lacks: the devices a container could not get.
func Unnamed(devs []Device, names map[string]bool) []string {
	var ids []string
	for _, d := range devs {
		if !names[d.ID] {
			ids = append(ids, d.ID)
		}
	}
	return ids
}

// RequireControl marks every device of h Unhealthy when h has no
// /dev/xpuctrl: no XPU is usable without it.
func RequireControl(h *discover.Host, devs []Device) {
	if h.Control == nil && len(devs) > 0 {
		reason := fmt.Sprintf("%s/dev/xpuctrl is missing: no XPU is usable without it", strings.TrimSuffix(h.DevRoot, "/"))
		MarkUnhealthy(devs, func(string) bool { return false }, reason)
	}
}
