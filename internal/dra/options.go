package dra

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/partition/sriov"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// Defaults.
const (
	DefaultPollInterval = 10 * time.Second
)

// DiscoverFunc reads the host; it is discover.Discover with the driver's roots.
type DiscoverFunc func() (*discover.Host, error)

// Config configures New; zero fields take the defaults. NodeName is
// required.
type Config struct {
	// DriverName is the DRA driver name (default xpu.baidu.com): the
	// slice's driver and the domain of the attributes.
	DriverName string
	// NodeName is the node whose slice is published; it is also the pool name.
	NodeName string
	// Kind is the CDI kind (vendor/class) of the names Prepare answers
	// (default baidu.com/xpu).
	Kind string
	// Discover reads the host (default discover.Discover()).
	Discover DiscoverFunc
	// Withheld returns the PCI addresses of the cards being laid out
	// (partition.LayingOut): their devices are not offered meanwhile
	// (xpunode.ScannerConfig.Withheld). Nil: none.
	Withheld func() ([]string, error)
	// SpecDirs are the CDI spec directories checked for the node spec
	// (default: the CDI library's, as xpunode.Scanner has them).
	SpecDirs []string
	// StateDir is where the prepared claims are recorded (the plugin's
	// data directory: it must outlive a reboot, so not a tmpfs). Empty
	// keeps them in memory only, for print-slice and tests.
	StateDir string
	// PollInterval is how often the host is read again (default 10s).
	PollInterval time.Duration
	// Clock is the clock of the taints' and health reports' times
	// (default time.Now).
	Clock func() time.Time
	// Metrics, when set, is where the driver registers its metrics
	// (xpu_dra_driver_*; the daemon's own registry, which it serves). Nil
	// counts nothing anyone can read.
	Metrics prometheus.Registerer
	// Log is the logger; the default discards everything.
	Log logger.Interface
	// KubeClient, when set, is how Run's sweep (sweep.go) reads the
	// ResourceClaims of the recorded claims. Nil: no sweep.
	KubeClient kubernetes.Interface
	// SweepInterval is how often Run sweeps the records of claims the
	// kubelet will not unprepare (default DefaultSweepInterval);
	// SweepGrace how long a record is found stale before it is swept
	// (default DefaultSweepGrace).
	SweepInterval, SweepGrace time.Duration

	// Partitions is how SR-IOV partitions are offered (dynamic.go) and
	// prepared (dynprepare.go); the zero value is PartitionsStatic.
	Partitions PartitionMode
	// Layout is the SR-IOV writer dynamic mode lays cards out with (its
	// roots, PodResources socket, settle time; its AfterApply rewrites
	// the node's CDI spec so that it names the new VFs by PCI address:
	// xpunode.RefreshSpecDevices). Nil: dynamic mode prepares only what
	// the cards' layouts already have. Static mode never uses it.
	Layout *sriov.Config
	// IdleWhole returns a card whose last claim is unprepared to whole
	// (--idle-layout=whole); by default the layout stays, for the next
	// claim of its size. Only dynamic mode lays cards out: with
	// PartitionsStatic it is refused.
	IdleWhole bool
	// relayout lays the card at addr out with n VFs (default: sriov.Apply
	// with layout); the tests' seam for a driver that dies half way.
	relayout func(ctx context.Context, addr string, n int) error
}

// withDefaults returns c with its defaults filled, or why c is unusable.
func (c Config) withDefaults() (*Config, error) {
	o := &c
	if o.DriverName == "" {
		o.DriverName = names.DRADriver
	}
	if o.Kind == "" {
		o.Kind = cdispec.DefaultKind
	}
	if o.Discover == nil {
		o.Discover = func() (*discover.Host, error) { return discover.Discover() }
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	if o.SweepGrace <= 0 {
		o.SweepGrace = DefaultSweepGrace
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	o.Log = logger.OrDiscard(o.Log)
	if o.relayout == nil && o.Layout != nil {
		o.relayout = applyLayout(*o.Layout)
	}
	if err := ValidateDriverName(o.DriverName); err != nil {
		return nil, err
	}
	if o.IdleWhole && o.Partitions != PartitionsDynamic {
		return nil, errors.New("idle cards returned to whole (--idle-layout=whole) needs dynamic partitions (--partitions=dynamic): in static mode the driver lays out no card")
	}
	switch o.Partitions {
	case PartitionsStatic, PartitionsDynamic:
	default:
		return nil, fmt.Errorf("partition mode %d is neither static nor dynamic", o.Partitions)
	}
	if o.NodeName == "" {
		return nil, fmt.Errorf("no node name: the ResourceSlice and its pool are named after the node (set NODE_NAME from spec.nodeName)")
	}
	return o, nil
}
