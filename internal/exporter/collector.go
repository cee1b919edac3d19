package exporter

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xpu-cdi/xpu-cdi/internal/exporter/xpusmi"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// The sources of xpu_exporter_source_up.
const (
	SourceDiscovery    = "discovery"
	SourceXPUSMI       = "xpu-smi"
	SourceProcfs       = "procfs"
	SourcePodResources = "pod-resources"
	// sourceXPUSMILines keys the reports of skipped lines, which a
	// successful run does not clear.
	sourceXPUSMILines = "xpu-smi output"
)

// Collector is the prometheus.Collector of the node's XPUs. It is
// unchecked (Describe sends nothing): a VF's series carry
// parent_pci_bus_id and a held device's series carry holder labels, which
// the other series of the same metric do not.
type Collector struct {
	o    Config
	scan *xpunode.Scanner

	// mu guards last, running and startedAt; it is never held across a
	// collection (collection.go).
	mu        sync.Mutex
	last      *reading
	running   chan struct{}
	startedAt time.Time

	// The collection's own state, touched by the one collection running.
	// detailOf maps xpu-smi indices to what -i N -q told (the PCI address,
	// serial and driver version), for the set of indices
	// busKey; failedAt holds when -q failed for an index, asked again
	// after qRetry.
	detailOf map[int]xpusmi.Detail
	failedAt map[int]time.Time
	busKey   string
	// reported holds what was logged already, by source (report.go).
	reported map[string]*reports
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns the collector.
func New(cfg Config) *Collector {
	o := cfg.withDefaults()
	return &Collector{o: o, reported: map[string]*reports{}, scan: xpunode.NewScanner(xpunode.ScannerConfig{
		Discover: o.Discover, Kind: o.Kind, SpecDirs: o.SpecDirs, NoSpecCheck: o.Kind == "",
		Empty: "exporting no XPU", Unusable: "they are exported with xpu_healthy 0", Log: o.Log,
	})}
}

// Describe implements prometheus.Collector: nothing, the collector is
// unchecked.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// read reads every source once and returns the series.
func (c *Collector) read() []prometheus.Metric {
	start := c.o.now()
	e := emitter{c: c}
	c.readSources(&e)
	e.gauge(metricCollectDuration, c.o.now().Sub(start).Seconds(), nil, nil)
	return e.metrics
}

// readSources sends the series of every source to e.
func (c *Collector) readSources(e *emitter) {
	ctx := context.Background()

	// The scanner logs what it cannot read, once per condition.
	scan := c.scan.Scan()
	e.up(SourceDiscovery, scan.Err == nil)
	if scan.Err != nil {
		if !c.o.NoXPUSMI {
			e.up(SourceXPUSMI, false)
		}
		return
	}
	h, devs := scan.Host, scan.Devices
	var err error

	var samples map[string]sample
	if !c.o.NoXPUSMI {
		var skipped int
		samples, skipped, err = c.sample(ctx, h)
		e.up(SourceXPUSMI, err == nil)
		e.gauge(metricSkippedLines, float64(skipped), nil, nil)
		if err != nil {
			c.report(SourceXPUSMI, err.Error())
		} else {
			c.recovered(SourceXPUSMI)
			if skipped == 0 {
				c.recovered(sourceXPUSMILines)
			}
		}
	}

	var owners podresources.Owners
	if c.o.Pods != nil {
		owners, err = c.o.Pods.List(ctx)
		e.up(SourcePodResources, err == nil)
		if err != nil {
			c.report(SourcePodResources, fmt.Sprintf("the XPUs' series carry no holder labels: %v", err))
		} else {
			c.recovered(SourcePodResources)
		}
	}

	resets, procOK, hasProc := c.resets(devs)
	if hasProc {
		e.up(SourceProcfs, procOK)
	}

	for _, d := range devs {
		c.device(e, d, samples, owners[d.Index], resets)
	}
}

// qRetry is how long an xpu-smi index whose -i N -q failed is left out
// before it is asked again.
const qRetry = time.Minute

// errNoXPUSMI is the error of a host on which discovery found no xpu-smi.
var errNoXPUSMI = errors.New("xpu-smi not found under the driver root: only what discovery knows is exported")

// runner returns the runner of the host's xpu-smi.
func (c *Collector) runner(h *discover.Host) (*xpusmi.Runner, error) {
	program := c.o.XPUSMIPath
	if program == "" {
		for _, name := range []string{"xpu-smi", "xpu_smi"} {
			for _, t := range h.Tools {
				if t.Kind == discover.KindTool && filepath.Base(t.Path) == name && program == "" {
					program = t.HostPath
				}
			}
		}
		if program == "" {
			return nil, errNoXPUSMI
		}
	}
	cfg := c.o.XPUSMI
	cfg.Chroot = c.o.XPUSMIChroot
	if cfg.Chroot != "" {
		rel, err := filepath.Rel(cfg.Chroot, program)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("xpu-smi %s is not below the host root %s it is run in", program, cfg.Chroot)
		}
		program = "/" + filepath.ToSlash(rel)
	}
	return xpusmi.NewRunner(program, cfg)
}

// sample runs xpu-smi -m and returns the samples by PCI address, and how
// many lines were skipped. Which address an xpu-smi index is comes from
// -i N -q, asked once per index while the set of indices stays the same.
// The -q runs of one collection stop once they have taken longer than one
// run may (the indices left are asked at the next collection), so that a
// collection runs at most about three times --xpu-smi-timeout, whatever the
// number of indices.
func (c *Collector) sample(ctx context.Context, h *discover.Host) (map[string]sample, int, error) {
	r, err := c.runner(h)
	if err != nil {
		return nil, 0, err
	}
	samples, lineErrs, err := r.Metrics(ctx)
	if err != nil {
		return nil, 0, err
	}
	for _, le := range lineErrs {
		c.report(sourceXPUSMILines, fmt.Sprintf("%s -m: skipping %v", r, le))
	}
	keys := make([]string, 0, len(samples))
	for _, s := range samples {
		keys = append(keys, strconv.Itoa(s.Index))
	}
	if key := strings.Join(keys, ","); key != c.busKey {
		c.detailOf, c.failedAt, c.busKey = map[int]xpusmi.Detail{}, map[int]time.Time{}, key
	}
	out := make(map[string]sample, len(samples))
	qStart, qBudget := c.o.now(), r.Timeout()
	for _, s := range samples {
		detail, ok := c.detailOf[s.Index]
		failed, tried := c.failedAt[s.Index]
		if !ok && (!tried || c.o.now().Sub(failed) >= qRetry) && c.o.now().Sub(qStart) <= qBudget {
			if d, err := r.Detail(ctx, s.Index); err != nil {
				c.report(SourceXPUSMI, fmt.Sprintf("xpu-smi index %d is left out: %v", s.Index, err))
				c.failedAt[s.Index] = c.o.now()
			} else {
				detail = d
				c.detailOf[s.Index] = d
				delete(c.failedAt, s.Index)
			}
		}
		bus := detail.BusID
		if bus == "" {
			continue
		}
		if _, dup := out[bus]; dup {
			c.report(SourceXPUSMI, fmt.Sprintf("xpu-smi gives two indices for PCI address %s: index %d is left out", bus, s.Index))
			continue
		}
		out[bus] = sample{Sample: s, detail: detail}
	}
	return out, len(lineErrs), nil
}

// sample is the telemetry of one device: its -m line and what -i N -q
// told of it.
type sample struct {
	xpusmi.Sample
	detail xpusmi.Detail
}

// resets reads the reset counters of devs from /proc/xpu (driver 4.x).
// hasProc is false on a host without /proc/xpu (driver 5.x); ok is false
// when a counter the driver has could not be read.
func (c *Collector) resets(devs []xpunode.Device) (counts map[int]float64, ok, hasProc bool) {
	root := fdio.NewRoot(c.o.DevRoot)
	defer func() { _ = root.Close() }()
	if st, err := root.Stat("/proc/xpu"); err != nil || !st.IsDir() {
		return nil, false, false
	}
	counts, ok = map[int]float64{}, true
	for _, d := range devs {
		n, err := readResetCount(root, d.Index)
		switch {
		case err == nil:
			counts[d.Index] = n
		case errors.Is(err, fs.ErrNotExist):
		default:
			ok = false
			c.report(SourceProcfs, err.Error())
		}
	}
	if ok {
		c.recovered(SourceProcfs)
	}
	return counts, ok, true
}

// device sends the series of one device: once per holder (holders.go),
// once without holder labels when nobody holds it. Its facts are the node's one
// reading of them (discover.Facts), as in its labels and DRA attributes.
func (c *Collector) device(e *emitter, d xpunode.Device, samples map[string]sample, owners []podresources.Owner, resets map[int]float64) {
	x, f := d.XPU, d.Facts
	names := []string{"xpu", "model"}
	values := []string{d.ID, f.Model}
	addr := x.Address()
	if addr != "" {
		names, values = append(names, "pci_bus_id"), append(values, addr)
	}
	if x.PCI != nil && x.PCI.Parent != "" {
		names, values = append(names, "parent_pci_bus_id"), append(values, x.PCI.Parent)
	}
	s, sampled := samples[addr]
	if addr == "" {
		sampled = false
	}
	if c.o.Pods != nil {
		var unlisted int
		owners, unlisted = holders(owners, c.o.MaxPodsPerXPU)
		e.gauge(metricUnlistedPods, float64(unlisted), names, values)
	}
	if len(owners) == 0 {
		owners = []podresources.Owner{{}}
	}
	for _, o := range owners {
		n, v := withOwner(names, values, o)
		in, iv := withFacts(n, v, factsWith(f, s.detail, sampled))
		e.gauge(metricInfo, 1, in, iv)
		healthy := 0.0
		if d.Health == xpunode.Healthy {
			healthy = 1
		} else {
			e.gauge(metricHealthInfo, 1, append(slices.Clip(n), "reason"), append(slices.Clip(v), d.Reason))
		}
		e.gauge(metricHealthy, healthy, n, v)
		switch {
		case sampled:
			e.gauge(metricMemoryTotal, s.MemoryTotal, n, v)
			e.gauge(metricMemoryUsed, s.MemoryUsed, n, v)
			e.gauge(metricUtilization, s.Utilization, n, v)
			e.gauge(metricTemperature, s.Temperature, n, v)
			e.gauge(metricPower, s.Power, n, v)
		case f.MemoryMiB > 0:
			e.gauge(metricMemoryTotal, float64(f.MemoryMiB<<20), n, v)
		}
		if r, ok := resets[d.Index]; ok {
			e.counter(metricResets, r, n, v)
		}
	}
}

// factsWith fills the serial and driver version discovery does not know
// (driver 5.x has no /proc/xpu) with what xpu-smi -q reports, when the
// device was sampled.
func factsWith(f discover.Facts, d xpusmi.Detail, sampled bool) discover.Facts {
	if !sampled {
		return f
	}
	if f.Serial == "" {
		f.Serial = d.Serial
	}
	if f.DriverVersion == "" {
		f.DriverVersion = d.DriverVersion
	}
	return f
}

// withFacts adds the labels of xpu_info for the facts that are known, and
// leaves out a fact that is not (a serial the driver does not tell, no
// XRE installed): PromQL treats an empty label as an absent one, so
// serial="" says nothing more, and a placeholder such as "unknown" would be
// taken for a value (every serial-less XPU grouped as one serial).
func withFacts(names, values []string, f discover.Facts) ([]string, []string) {
	n, v := slices.Clip(names), slices.Clip(values)
	for _, l := range []struct{ name, value string }{
		{"family", f.Generation}, {"serial", f.Serial}, {"driver_version", f.DriverVersion}, {"xre_version", f.XREVersion},
	} {
		if l.value != "" {
			n, v = append(n, l.name), append(v, l.value)
		}
	}
	return n, v
}

// withOwner adds the holder labels of o (none for the zero Owner; no
// container or claim where o has none).
func withOwner(names, values []string, o podresources.Owner) ([]string, []string) {
	if o == (podresources.Owner{}) {
		return names, values
	}
	n := append(slices.Clip(names), LabelNamespace, LabelPod)
	v := append(slices.Clip(values), o.Namespace, o.Pod)
	if o.Container != "" {
		n, v = append(n, LabelContainer), append(v, o.Container)
	}
	if o.Claim != "" {
		n, v = append(n, "claim", "claim_namespace"), append(v, o.Claim, o.ClaimNamespace)
	}
	return n, v
}
