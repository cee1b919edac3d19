package dra

import (
	"fmt"
	"time"

	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// Defaults.
const (
	DefaultDriverName   = "xpu.baidu.com"
	DefaultPollInterval = 10 * time.Second
)

// DiscoverFunc reads the host; it is discover.Discover with the driver's roots.
type DiscoverFunc func() (*discover.Host, error)

type options struct {
	driverName   string
	nodeName     string
	kind         string
	discover     DiscoverFunc
	specDirs     []string
	stateDir     string
	pollInterval time.Duration
	now          func() time.Time
	log          logger.Interface
}

// Option configures New.
type Option func(*options)

// WithDriverName sets the DRA driver name (default xpu.baidu.com).
func WithDriverName(name string) Option { return func(o *options) { o.driverName = name } }

// WithNodeName sets the node whose slice is published; it is also the pool name.
func WithNodeName(name string) Option { return func(o *options) { o.nodeName = name } }

// WithKind sets the CDI kind (vendor/class) of the names Prepare answers.
func WithKind(kind string) Option { return func(o *options) { o.kind = kind } }

// WithDiscover sets how the host is read (default discover.Discover()).
func WithDiscover(f DiscoverFunc) Option { return func(o *options) { o.discover = f } }

// WithSpecDirs sets the CDI spec directories checked for the node spec
// (default: the CDI library's, as xpunode.Scanner has them).
func WithSpecDirs(dirs ...string) Option {
	return func(o *options) { o.specDirs = append([]string{}, dirs...) }
}

// WithStateDir sets where the prepared claims are recorded (the plugin's
// data directory: it must outlive a reboot, so not a tmpfs). Empty keeps
// them in memory only, for print-slice and tests.
func WithStateDir(dir string) Option { return func(o *options) { o.stateDir = dir } }

// WithPollInterval sets how often the host is read again.
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.pollInterval = d } }

// WithClock sets the clock of the taints' and health reports' times.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithLogger sets the logger; the default discards everything.
func WithLogger(l logger.Interface) Option { return func(o *options) { o.log = l } }

func newOptions(opts []Option) (*options, error) {
	o := &options{}
	for _, opt := range opts {
		opt(o)
	}
	if o.driverName == "" {
		o.driverName = DefaultDriverName
	}
	if o.kind == "" {
		o.kind = cdispec.DefaultKind
	}
	if o.discover == nil {
		o.discover = func() (*discover.Host, error) { return discover.Discover() }
	}
	if o.pollInterval <= 0 {
		o.pollInterval = DefaultPollInterval
	}
	if o.now == nil {
		o.now = time.Now
	}
	o.log = logger.OrDiscard(o.log)
	if err := ValidateDriverName(o.driverName); err != nil {
		return nil, err
	}
	if o.nodeName == "" {
		return nil, fmt.Errorf("no node name: the ResourceSlice and its pool are named after the node (set NODE_NAME from spec.nodeName)")
	}
	return o, nil
}
