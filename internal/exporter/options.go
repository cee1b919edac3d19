package exporter

import (
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/exporter/xpusmi"
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

	// Pods attributes devices to pods (default: no attribution).
	Pods *PodResources

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
	if c.now == nil {
		c.now = time.Now
	}
	return c
}
