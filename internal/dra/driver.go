package dra

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
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
	// layouts records the re-layouts of dynamic mode (layoutjournal.go).
	layouts *layoutJournal
	m       *metrics

	mu sync.Mutex
	// devices is the last scan; api the slice's devices built from it.
	devices []xpunode.Device
	api     []resourceapi.Device
	// counters are the slice's counter sets (dynamic mode), health the
	// health of each of api's devices for the kubelet.
	counters []resourceapi.CounterSet
	health   []deviceHealth
	// changedAt is when each device name last came to stand for another
	// device (identity.go): a claim allocated before is not prepared.
	changedAt map[string]time.Time
	// changed is closed (and replaced) when the devices change: the health
	// streams wait on it.
	changed chan struct{}
	// notes logs a condition when it appears or changes, not at every poll.
	notes xpunode.Notes
	// publishErr is why the last ResourceSlice write failed (publish.go);
	// published is set once Run handed the slices to the publisher.
	publishErr error
	published  bool
	// stale are the records the sweep found stale, since when and why.
	stale map[types.UID]staleSince
	// fatal carries the first error HandleError got that the helper
	// library does not mark recoverable: Run returns it.
	fatal chan error
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
	m, err := newMetrics(o.Metrics)
	if err != nil {
		return nil, err
	}
	return &Driver{
		o: o,
		m: m,
		scanner: xpunode.NewScanner(xpunode.ScannerConfig{
			Discover: o.Discover, Withheld: o.Withheld, Kind: o.Kind, SpecDirs: o.SpecDirs, Log: o.Log,
			Empty:    "publishing an empty ResourceSlice",
			Unusable: "they are tainted and cannot be prepared",
		}),
		claims:    claims,
		layouts:   newLayoutJournal(o.StateDir),
		changed:   make(chan struct{}),
		changedAt: map[string]time.Time{},
		fatal:     make(chan error, 1),
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

// taintOf is the taint of dev, false for a healthy device. NoSchedule and
// not NoExecute: a device in IN_RESET or RECOVERING may come back, and
// evicting the pods that use it is the operator's call.
func (d *Driver) taintOf(dev xpunode.Device, h *discover.Host) (resourceapi.DeviceTaint, bool) {
	if dev.Health == xpunode.Healthy {
		return resourceapi.DeviceTaint{}, false
	}
	return resourceapi.DeviceTaint{Key: d.TaintKey(), Value: taintValue(dev, h), Effect: resourceapi.DeviceTaintEffectNoSchedule}, true
}

// build converts a scan into the slice's devices: one per XPU, tainted
// NoSchedule while unhealthy. A taint that was already there keeps its
// time.
func (d *Driver) build(devs []xpunode.Device, h *discover.Host, prev []resourceapi.Device) []resourceapi.Device {
	out := make([]resourceapi.Device, 0, len(devs))
	for _, dev := range devs {
		ad := apiDevice(dev)
		if taint, ok := d.taintOf(dev, h); ok {
			ad.Taints = []resourceapi.DeviceTaint{keepTime(taint, prev, ad.Name, d.o.Clock)}
		}
		out = append(out, ad)
	}
	return out
}

// keepTime returns taint with the time it had on the device name of prev
// when it was already there, else now.
func keepTime(taint resourceapi.DeviceTaint, prev []resourceapi.Device, name string, clock func() time.Time) resourceapi.DeviceTaint {
	i := slices.IndexFunc(prev, func(p resourceapi.Device) bool { return p.Name == name })
	if i >= 0 && len(prev[i].Taints) == 1 && prev[i].Taints[0].Key == taint.Key && prev[i].Taints[0].Value == taint.Value {
		taint.TimeAdded = prev[i].Taints[0].TimeAdded
	} else {
		now := metav1.NewTime(clock().Truncate(time.Second))
		taint.TimeAdded = &now
	}
	return taint
}

// Refresh reads the host and the specs again and reports whether the
// slice's devices changed.
func (d *Driver) Refresh() bool {
	sc := d.scanner.Scan()
	d.m.Observe(sc)
	devs, h := sc.Devices, sc.Host
	d.mu.Lock()
	var built []resourceapi.Device
	var counters []resourceapi.CounterSet
	var health []deviceHealth
	var left []string
	switch d.o.Partitions {
	case PartitionsDynamic:
		built, counters, health, left = d.buildDynamic(devs, h, d.api)
	case PartitionsStatic:
		built = d.build(devs, h, d.api)
		for _, dev := range devs {
			health = append(health, healthOf(names.DRADevice(dev.Index), dev))
		}
	}
	api, warnings := d.validate(built)
	bestFitOrder(api)
	warnings = append(left, warnings...)
	same := d.api != nil && resourceslice.DevicesDeepEqual(d.api, api) && apiequality.Semantic.DeepEqual(d.counters, counters)
	if !same {
		renumbered(d.api, api, d.changedAt, d.o.Clock())
		d.devices, d.api, d.counters, d.health = devs, api, counters, health
		close(d.changed)
		d.changed = make(chan struct{})
	}
	d.mu.Unlock()
	d.notes.Note(d.o.Log, "invalid", strings.Join(warnings, "; "), d.o.Log.Warnf, "every fact of the host is valid in the ResourceSlice again")
	switch {
	case same:
	case d.o.Partitions == PartitionsDynamic:
		d.o.Log.Infof("publishing every partition of the SR-IOV cards in the ResourceSlices of node %s: %s", d.o.NodeName, describeDynamic(api, counters))
	default:
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

// validate returns devs with what the API server would refuse left out
// (see validate.go), and what was left out.
func (d *Driver) validate(devs []resourceapi.Device) ([]resourceapi.Device, []string) {
	var warnings []string
	for i := range devs {
		var w []string
		devs[i], w = validDevice(devs[i])
		warnings = append(warnings, w...)
	}
	if len(warnings) > 0 {
		warnings[0] = "publishing the ResourceSlice without what the API server would refuse: " + warnings[0]
	}
	return devs, warnings
}

// Resources returns what the node publishes: one pool named after the
// node with the XPUs in as many slices as the API's limit on devices per
// slice needs (one empty slice on a node without XPU).
func (d *Driver) Resources() resourceslice.DriverResources {
	d.mu.Lock()
	defer d.mu.Unlock()
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{d.o.NodeName: poolOf(d.api, d.counters)}}
}

// poolOf puts a copy of devs and sets in the slices of one pool. A slice
// holds counter sets or devices, not both: the counter sets first, then
// the devices that consume them.
func poolOf(devs []resourceapi.Device, sets []resourceapi.CounterSet) resourceslice.Pool {
	cd := make([]resourceapi.Device, len(devs))
	for i := range devs {
		cd[i] = *devs[i].DeepCopy()
	}
	var pool resourceslice.Pool
	for _, part := range splitCounterSets(sets) {
		cp := make([]resourceapi.CounterSet, len(part))
		for i := range part {
			cp[i] = *part[i].DeepCopy()
		}
		pool.Slices = append(pool.Slices, resourceslice.Slice{SharedCounters: cp})
	}
	if len(cd) > 0 || len(pool.Slices) == 0 {
		for _, p := range splitDevices(cd) {
			pool.Slices = append(pool.Slices, resourceslice.Slice{Devices: p})
		}
	}
	return pool
}

// Slices returns the ResourceSlice objects the node publishes, as the
// ResourceSlice controller writes them (without their generated name
// suffix and owner reference; several slices are numbered): what
// print-slice shows.
func (d *Driver) Slices() []*resourceapi.ResourceSlice {
	return d.slicesOf(d.Resources().Pools[d.o.NodeName], "")
}

// slicesOf returns the ResourceSlice objects of the node's pool, named
// after the node and the driver, then suffix.
func (d *Driver) slicesOf(pool resourceslice.Pool, suffix string) []*resourceapi.ResourceSlice {
	node := d.o.NodeName
	parts := pool.Slices
	out := make([]*resourceapi.ResourceSlice, len(parts))
	for i, p := range parts {
		name := node + "-" + d.o.DriverName + suffix
		if len(parts) > 1 {
			name += "-" + strconv.Itoa(i)
		}
		out[i] = &resourceapi.ResourceSlice{
			TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceSlice"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:         d.o.DriverName,
				NodeName:       &node,
				Pool:           resourceapi.ResourcePool{Name: node, ResourceSliceCount: int64(len(parts))},
				Devices:        p.Devices,
				SharedCounters: p.SharedCounters,
			},
		}
	}
	return out
}

// Run publishes the slice, then polls the host every interval and
// publishes again when it changed, until ctx ends (nil) or the helper
// reports a fatal error (see HandleError), which it returns: the process
// should then end.
func (d *Driver) Run(ctx context.Context, pub Publisher) error {
	if d.o.Partitions == PartitionsDynamic {
		// Before the first slice: a card left half laid out by a driver
		// that died is finished or put back (dynprepare.go).
		d.mu.Lock()
		_, err := d.finishLayouts(ctx)
		d.mu.Unlock()
		if err != nil {
			d.o.Log.Errorf("finishing the re-layouts recorded as started (their cards are refused until they are): %v", err)
		}
	}
	// The claims deleted while the driver was down are found now and
	// swept once their grace has passed (sweep.go).
	d.sweep(ctx)
	if d.o.Partitions == PartitionsDynamic {
		d.mu.Lock()
		d.reconcile(ctx)
		d.mu.Unlock()
	}
	d.Refresh()
	if err := pub.PublishResources(ctx, d.Resources()); err != nil {
		return fmt.Errorf("publishing the ResourceSlice of node %s: %w", d.o.NodeName, err)
	}
	d.m.publishes.Inc()
	d.mu.Lock()
	d.published = true
	d.mu.Unlock()
	t := time.NewTicker(d.o.PollInterval)
	defer t.Stop()
	sweep := time.NewTicker(d.o.SweepInterval)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-d.fatal:
			return err
		case <-t.C:
		case <-sweep.C:
			d.sweep(ctx)
		}
		if d.Refresh() {
			if err := pub.PublishResources(ctx, d.Resources()); err != nil {
				return fmt.Errorf("publishing the ResourceSlice of node %s: %w", d.o.NodeName, err)
			}
			d.m.publishes.Inc()
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
		s := names.DRADevice(dev.Index) + " (numa " + fmt.Sprint(dev.NUMANode)
		if dev.Health != xpunode.Healthy {
			s += ", tainted: " + dev.Reason
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, ", ")
}
