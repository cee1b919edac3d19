package exporter

import (
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/exporter/xpusmi"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// DiscoverFunc reads the host: discover.Discover with the exporter's roots.
type DiscoverFunc func() (*discover.Host, error)

type options struct {
	discover DiscoverFunc
	devRoot  string

	// xpu-smi: off, the program discovery finds, or smiPath; run in a
	// chroot into smiChroot when it is set.
	smiOff    bool
	smiPath   string
	smiChroot string
	smiOpts   []xpusmi.Option

	pods *PodResources

	kind     string
	specDirs []string

	log logger.Interface
	now func() time.Time
}

// Option configures a Collector.
type Option func(*options)

// WithDiscover sets how the host is read and the dev root /proc/xpu is
// read below (default: discover.Discover() and /).
func WithDiscover(f DiscoverFunc, devRoot string) Option {
	return func(o *options) { o.discover, o.devRoot = f, devRoot }
}

// WithXPUSMI sets the xpu-smi program: path as the host sees it (empty:
// the one discovery finds under the driver root), run inside a chroot into
// chroot when it is not empty, with opts.
func WithXPUSMI(path, chroot string, opts ...xpusmi.Option) Option {
	return func(o *options) { o.smiPath, o.smiChroot, o.smiOpts = path, chroot, opts }
}

// WithoutXPUSMI turns the xpu-smi source off.
func WithoutXPUSMI() Option { return func(o *options) { o.smiOff = true } }

// WithPodResources attributes devices to pods through p (default: no
// attribution).
func WithPodResources(p *PodResources) Option { return func(o *options) { o.pods = p } }

// WithSpecs judges health as the device plugin and the DRA driver do,
// against the CDI specs of kind in dirs (a device no spec names cannot be
// given to a container). Without it the spec is not looked at.
func WithSpecs(kind string, dirs []string) Option {
	return func(o *options) { o.kind, o.specDirs = kind, dirs }
}

// WithLogger sets the logger (default: none).
func WithLogger(l logger.Interface) Option { return func(o *options) { o.log = l } }

func newOptions(opts []Option) options {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.discover == nil {
		o.discover = func() (*discover.Host, error) { return discover.Discover() }
		o.devRoot = "/"
	}
	o.log = logger.OrDiscard(o.log)
	if o.now == nil {
		o.now = time.Now
	}
	return o
}
