package dra

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Publisher publishes the node's ResourceSlices: the kubelet plugin
// helper (*kubeletplugin.Helper) in the driver, a recorder in tests.
type Publisher interface {
	PublishResources(ctx context.Context, resources resourceslice.DriverResources) error
}

// Driver is the DRA driver of one node. Create it with New; the kubelet
// plugin helper calls its Prepare and Unprepare methods, Run keeps the
// node's slice true.
type Driver struct {
	o       *Config
	scanner *xpunode.Scanner
	claims  *claimStore

	mu sync.Mutex
	// devices is the last scan; api the slice's devices built from it.
	devices []xpunode.Device
	api     []resourceapi.Device
	// changed is closed (and replaced) when the devices change: the health
	// streams wait on it.
	changed chan struct{}
}

// New returns a driver configured by cfg; it reads the recorded claims of
// the state directory, not the host yet.
func New(cfg Config) (*Driver, error) {
	o, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	claims, err := openClaimStore(o.StateDir, o.Log)
	if err != nil {
		return nil, err
	}
	return &Driver{
		o: o,
		scanner: xpunode.NewScanner(xpunode.ScannerConfig{
			Discover: o.Discover, Kind: o.Kind, SpecDirs: o.SpecDirs, Log: o.Log,
			Empty:    "publishing an empty ResourceSlice",
			Unusable: "they are tainted and cannot be prepared",
		}),
		claims:  claims,
		changed: make(chan struct{}),
	}, nil
}

// DriverName is the driver's name.
func (d *Driver) DriverName() string { return d.o.DriverName }

// PoolName is the pool of the node's devices: the node name.
func (d *Driver) PoolName() string { return d.o.NodeName }

// TaintKey is the key of the taint of a device that cannot run work; its
// value says why (see taintValue).
func (d *Driver) TaintKey() string { return d.o.DriverName + "/unhealthy" }

var labelValue = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// taintValue is the cause of an unhealthy device as a taint value: the
// driver's state (ERROR, IN_RESET, ...), NoXPUCtrl or NoCDISpec.
func taintValue(dev xpunode.Device, h *discover.Host) string {
	switch {
	case xpunode.HealthOf(dev.State) == xpunode.Unhealthy:
		if s := strings.ToUpper(strings.TrimSpace(dev.State)); labelValue.MatchString(s) {
			return s
		}
		return "Error"
	case h != nil && h.Control == nil:
		return "NoXPUCtrl"
	default:
		return "NoCDISpec"
	}
}

// build converts a scan into the slice's devices: one per XPU, tainted
// NoSchedule while unhealthy. A taint that was already there keeps its
// time. NoSchedule and not NoExecute: a device in IN_RESET or RECOVERING
// may come back, and evicting the pods that use it is the operator's call.
func (d *Driver) build(devs []xpunode.Device, h *discover.Host, prev []resourceapi.Device) []resourceapi.Device {
	out := make([]resourceapi.Device, 0, len(devs))
	for _, dev := range devs {
		ad := apiDevice(dev)
		if dev.Health != xpunode.Healthy {
			taint := resourceapi.DeviceTaint{Key: d.TaintKey(), Value: taintValue(dev, h), Effect: resourceapi.DeviceTaintEffectNoSchedule}
			i := slices.IndexFunc(prev, func(p resourceapi.Device) bool { return p.Name == ad.Name })
			if i >= 0 && len(prev[i].Taints) == 1 && prev[i].Taints[0].Key == taint.Key && prev[i].Taints[0].Value == taint.Value {
				taint.TimeAdded = prev[i].Taints[0].TimeAdded
			} else {
				now := metav1.NewTime(d.o.Clock().Truncate(time.Second))
				taint.TimeAdded = &now
			}
			ad.Taints = []resourceapi.DeviceTaint{taint}
		}
		out = append(out, ad)
	}
	return out
}

// Refresh reads the host and the specs again and reports whether the
// slice's devices changed.
func (d *Driver) Refresh() bool {
	sc := d.scanner.Scan()
	devs, h := sc.Devices, sc.Host
	d.mu.Lock()
	api := d.build(devs, h, d.api)
	same := d.api != nil && resourceslice.DevicesDeepEqual(d.api, api)
	if !same {
		d.devices, d.api = devs, api
		close(d.changed)
		d.changed = make(chan struct{})
	}
	d.mu.Unlock()
	if !same {
		d.o.Log.Infof("publishing %d XPU(s) in the ResourceSlice of node %s: %s", len(devs), d.o.NodeName, describe(devs))
	}
	return !same
}

// Devices returns the devices of the last scan.
func (d *Driver) Devices() []xpunode.Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.devices)
}

// Resources returns what the node publishes: one pool named after the
// node with one slice of every XPU (empty on a node without XPU).
func (d *Driver) Resources() resourceslice.DriverResources {
	d.mu.Lock()
	defer d.mu.Unlock()
	devs := make([]resourceapi.Device, len(d.api))
	for i := range d.api {
		devs[i] = *d.api[i].DeepCopy()
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		d.o.NodeName: {Slices: []resourceslice.Slice{{Devices: devs}}},
	}}
}

// Slice returns the ResourceSlice object the node publishes, as the
// ResourceSlice controller writes it (without its generated name suffix and
// owner reference): what print-slice shows.
func (d *Driver) Slice() *resourceapi.ResourceSlice {
	res := d.Resources()
	node := d.o.NodeName
	return &resourceapi.ResourceSlice{
		TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + d.o.DriverName},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   d.o.DriverName,
			NodeName: &node,
			Pool:     resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices:  res.Pools[node].Slices[0].Devices,
		},
	}
}

// Run publishes the slice, then polls the host every interval and
// publishes again when it changed, until ctx ends.
func (d *Driver) Run(ctx context.Context, pub Publisher) error {
	d.Refresh()
	if err := pub.PublishResources(ctx, d.Resources()); err != nil {
		return fmt.Errorf("publishing the ResourceSlice of node %s: %w", d.o.NodeName, err)
	}
	t := time.NewTicker(d.o.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if d.Refresh() {
			if err := pub.PublishResources(ctx, d.Resources()); err != nil {
				return fmt.Errorf("publishing the ResourceSlice of node %s: %w", d.o.NodeName, err)
			}
		}
	}
}

// describe summarizes devs for the log: "0 (numa 0), 1 (numa 1, Unhealthy: ...)".
func describe(devs []xpunode.Device) string {
	if len(devs) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(devs))
	for _, dev := range devs {
		s := DeviceName(dev.Index) + " (numa " + fmt.Sprint(dev.NUMANode)
		if dev.Health != xpunode.Healthy {
			s += ", tainted: " + dev.Reason
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, ", ")
}
