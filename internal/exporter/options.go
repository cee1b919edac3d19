package exporter

import (
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/exporter/xpusmi"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// DiscoverFunc reads the host: discover.Discover with the exporter's roots.
type DiscoverFunc func() (*discover.Host, error)

// Config configures New; zero fields take the defaults.
type Config struct {
	// Discover reads the host and DevRoot is the dev root /proc/xpu is
	// read below (default: discover.Discover() and /).
	Discover DiscoverFunc
	DevRoot  string

	// NoXPUSMI turns the xpu-smi source off. Otherwise XPUSMIPath is the
	// program as the host sees it (empty: the one discovery finds under the
	// driver root), run inside a chroot into XPUSMIChroot when it is set,
	// bounded by XPUSMI's Timeout and MaxOutput (its Chroot is
	// XPUSMIChroot's).
	NoXPUSMI     bool
	XPUSMIPath   string
	XPUSMIChroot string
	XPUSMI       xpusmi.Config

	// Pods attributes devices to pods (default: no attribution), at most
	// MaxPodsPerXPU pods with series of their own per device (default
	// DefaultMaxPodsPerXPU).
	Pods          *podresources.Client
	MaxPodsPerXPU int

	// MinInterval: a scrape within MinInterval of the start of the last
	// collection is served that collection's series (0: each scrape
	// collects). Wait bounds how long a scrape waits for a collection in
	// progress (default DefaultCollectionWait); StuckAfter is how long a
	// collection may run before Healthy fails (default DefaultStuckAfter).
	MinInterval time.Duration
	Wait        time.Duration
	StuckAfter  time.Duration

	// Kind and SpecDirs: health is judged as the device plugin and the
	// DRA driver judge it, against the CDI specs of Kind in SpecDirs (a
	// device no spec names cannot be given to a container). Without Kind
	// the specs are not looked at.
	Kind     string
	SpecDirs []string

	// Log is the logger (default: none).
	Log logger.Interface

	// now is the clock (tests).
	now func() time.Time
}

// withDefaults returns c with its defaults filled.
func (c Config) withDefaults() Config {
	if c.Discover == nil {
		c.Discover = func() (*discover.Host, error) { return discover.Discover() }
		c.DevRoot = "/"
	}
	c.Log = logger.OrDiscard(c.Log)
	if c.MaxPodsPerXPU <= 0 {
		c.MaxPodsPerXPU = DefaultMaxPodsPerXPU
	}
	if c.Wait <= 0 {
		c.Wait = DefaultCollectionWait
	}
	if c.StuckAfter <= 0 {
		c.StuckAfter = DefaultStuckAfter
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}
