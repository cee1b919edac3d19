package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
)

// Plugin is the device plugin of a node: one Resource (socket,
// registration, ListAndWatch) per resource it advertises, all fed by one
// scan of the host. Create it with New, start it with Run.
type Plugin struct {
	o       *Config
	scanner *xpunode.Scanner
	notes   xpunode.Notes
	m       *metrics

	mu sync.Mutex
	// resources are by their name before sharing renames them.
	resources map[string]*Resource
	// pinned is, under the single strategy, the size the plugin advertises
	// (the last one all devices agreed on); -1 before any.
	pinned int64
	// run is set while Run serves: resources created then are served too.
	run *runState
	// stopped is closed when Run ends, to end the streams.
	stopped chan struct{}
}

// runState is what Run shares with the resources it starts.
type runState struct {
	ctx  context.Context
	wg   *sync.WaitGroup
	errs chan error
}

// New returns a plugin configured by cfg. It reads nothing yet.
func New(cfg Config) (*Plugin, error) {
	o, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(o.Metrics)
	if err != nil {
		return nil, err
	}
	p := &Plugin{
		o: o,
		m: m,
		scanner: xpunode.NewScanner(xpunode.ScannerConfig{
			Discover: o.Discover, Withheld: o.Withheld, Kind: o.Kind, SpecDirs: o.SpecDirs, Log: o.Log,
			// Only the cdi-* strategies answer CDI names an engine resolves.
			NoSpecCheck: !o.Strategy.UsesCDISpec(),
			Empty:       "advertising no " + o.Sharing.For(o.ResourceName).ResourceName,
			Unusable:    "they are Unhealthy",
		}),
		resources: map[string]*Resource{},
		pinned:    -1,
		stopped:   make(chan struct{}),
	}
	if o.Strategy == StrategyVolumeMounts {
		o.Log.Warnf("%s", volumeMountsCaveat)
	}
	// The whole cards' resource is always there, empty on a node without
	// XPU (or whose cards are all cut, under mixed).
	p.resources[o.ResourceName] = p.newResource(o.ResourceName)
	return p, nil
}

func (p *Plugin) newResource(key string) *Resource {
	return &Resource{
		o: p.o, m: p.m, key: key, share: p.o.Sharing.For(key),
		changed: make(chan struct{}), stopped: p.stopped,
		unready: errors.New("not registered with the kubelet yet"),
	}
}

// Whole is the resource of the whole cards (--resource-name; every device
// under the single strategy).
func (p *Plugin) Whole() *Resource { return p.Resource(p.o.ResourceName) }

// Resource returns the resource named name before sharing renames it
// (baidu.com/xpu-24gb), nil when the plugin has none.
func (p *Plugin) Resource(name string) *Resource {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resources[name]
}

// Resources returns the plugin's resources, the whole cards' first, then
// the partition sizes in name order.
func (p *Plugin) Resources() []*Resource {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []*Resource{p.resources[p.o.ResourceName]}
	for _, k := range slices.Sorted(maps.Keys(p.resources)) {
		if k != p.o.ResourceName {
			out = append(out, p.resources[k])
		}
	}
	return out
}

// Devices returns what the whole cards' resource advertises now.
func (p *Plugin) Devices() []Device { return p.Whole().Devices() }

// SocketPath is the whole cards' resource's socket.
func (p *Plugin) SocketPath() string { return p.Whole().SocketPath() }

// Refresh reads the host and the CDI specs again and, where what the
// kubelet would see changed, updates the device lists and wakes the
// ListAndWatch streams. A partition size seen for the first time gets its
// resource (served at once when Run is serving); a size that is gone keeps
// its resource with an empty list. It reports whether any list changed.
func (p *Plugin) Refresh() bool {
	changed, _ := p.refresh(false)
	return changed
}

// refresh is Refresh; at start, under the single strategy, devices of
// several sizes are an error (the plugin refuses to start).
func (p *Plugin) refresh(atStart bool) (bool, error) {
	sc := p.scanner.Scan()
	if p.o.HostObserver != nil {
		p.o.HostObserver(sc.Host, sc.Err)
	}
	p.m.Observe(sc)
	g := group(p.o.PartitionStrategy, p.o.ResourceName, sc.Devices)
	if p.o.PartitionStrategy == PartitionSingle {
		if g.mixedSizes != "" && atStart {
			return false, fmt.Errorf("--partition-strategy single advertises every XPU as %s and needs them all of one size, but this node has %s: "+
				"lay every card out alike (xpu-cdi partition apply --layout all=N) or use --partition-strategy mixed",
				p.o.ResourceName, g.mixedSizes)
		}
		p.pinSize(&g)
	} else {
		msg := ""
		if len(g.unsized) > 0 {
			msg = fmt.Sprintf("XPU %s: partition(s) whose size this host does not tell (no memory in procfs, a VF count the partition table does not list): "+
				"not advertised under --partition-strategy mixed", strings.Join(idsOf(g.unsized), ", "))
		}
		p.notes.Note(p.o.Log, "unsized", msg, p.o.Log.Warnf, "")
	}
	changed := false
	for _, key := range slices.Sorted(maps.Keys(g.byResource)) {
		r, err := p.resourceFor(key)
		if err != nil {
			p.notes.Note(p.o.Log, "name "+key, err.Error(), p.o.Log.Errorf, "")
			continue
		}
		changed = r.update(g.byResource[key]) || changed
	}
	// Sizes that are gone advertise nothing.
	for _, r := range p.Resources() {
		if _, ok := g.byResource[r.key]; !ok {
			changed = r.update(nil) || changed
		}
	}
	return changed, nil
}

// pinSize applies the single strategy's rule at run time: the plugin
// advertises the last size all devices agreed on; while a layout change
// leaves several sizes, the devices of another size are Unhealthy.
func (p *Plugin) pinSize(g *grouping) {
	p.mu.Lock()
	if g.mixedSizes == "" && g.size >= 0 {
		p.pinned = g.size
	}
	pinned := p.pinned
	p.mu.Unlock()
	msg := ""
	if g.mixedSizes != "" {
		want := names.PartitionSizeName(pinned)
		if want == "" {
			want = "none yet"
		}
		msg = fmt.Sprintf("--partition-strategy single: the XPUs are no longer of one size (%s); those not of the size advertised so far (%s) are Unhealthy until the node is laid out alike again",
			g.mixedSizes, want)
		devs := slices.Clone(g.byResource[p.o.ResourceName])
		reason := fmt.Sprintf("--partition-strategy single advertises XPUs of %s only; this node now has %s", want, g.mixedSizes)
		for i := range devs {
			if devs[i].Health == xpunode.Healthy && (pinned < 0 || devs[i].Facts.MemoryMiB != pinned) {
				devs[i].Health, devs[i].Reason = xpunode.Unhealthy, reason
			}
		}
		g.byResource[p.o.ResourceName] = devs
	}
	p.notes.Note(p.o.Log, "single", msg, p.o.Log.Errorf, "the XPUs are of one size again")
}

// resourceFor returns the resource key, creating it (and serving it, when
// Run serves) the first time.
func (p *Plugin) resourceFor(key string) (*Resource, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.resources[key]; ok {
		return r, nil
	}
	r := p.newResource(key)
	if err := ValidateResourceName(r.Name()); err != nil {
		return nil, fmt.Errorf("the partition resource cannot be advertised (--resource-name is too long for the size suffix?): %w", err)
	}
	for _, other := range p.resources {
		if other.Name() == r.Name() {
			return nil, fmt.Errorf("%s and %s would both be advertised as %s: change the sharing configuration's rename", other.key, key, r.Name())
		}
	}
	p.resources[key] = r
	p.o.Log.Infof("a new resource: %s", r.Name())
	if p.run != nil {
		p.serve(r)
	}
	return r, nil
}

// serve runs r's registration loop under Run; p.mu is held.
func (p *Plugin) serve(r *Resource) {
	run := p.run
	run.wg.Add(1)
	go func() {
		defer run.wg.Done()
		if err := r.run(run.ctx); err != nil {
			select {
			case run.errs <- err:
			default:
			}
		}
	}()
}

// Ready says why the plugin is not registered with the kubelet and serving
// every resource's socket; nil when it is.
func (p *Plugin) Ready() error {
	rs := p.Resources()
	if len(rs) == 1 {
		return rs[0].Ready()
	}
	var errs []error
	for _, r := range rs {
		if err := r.Ready(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Name(), err))
		}
	}
	return errors.Join(errs...)
}

func idsOf(devs []Device) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.ID
	}
	return out
}
