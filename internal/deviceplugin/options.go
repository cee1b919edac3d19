package deviceplugin

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// Defaults.
const (
	DefaultResourceName   = "baidu.com/xpu"
	DefaultPluginDir      = "/var/lib/kubelet/device-plugins"
	DefaultHealthInterval = 10 * time.Second
	DefaultWatchInterval  = time.Second
	// KubeletSocketName is the kubelet's registration socket in the plugin
	// directory.
	KubeletSocketName = "kubelet.sock"
)

// DiscoverFunc reads the host; it is discover.Discover with the plugin's roots.
type DiscoverFunc func() (*discover.Host, error)

// Config configures New; zero fields take the defaults.
type Config struct {
	// ResourceName is the extended resource of whole cards (default
	// baidu.com/xpu); under the mixed partition strategy each partition
	// size is ResourceName-SIZE (baidu.com/xpu-24gb). Sharing may rename
	// each of them.
	ResourceName string
	// PartitionStrategy is how SR-IOV partitions are advertised (default
	// mixed, which on a node without partitions is the one resource).
	PartitionStrategy PartitionStrategy
	// Kind is the CDI kind (vendor/class) of the names Allocate returns
	// (default baidu.com/xpu).
	Kind string
	// Strategy is the device list strategy (default cdi-cri).
	Strategy Strategy
	// PluginDir is the kubelet's device plugin directory, where the
	// kubelet's socket is and the plugin's socket is created (default
	// /var/lib/kubelet/device-plugins).
	PluginDir string
	// Discover reads the host (default discover.Discover()).
	Discover DiscoverFunc
	// Withheld returns the PCI addresses of the cards being laid out
	// (partition.LayingOut): their devices are not offered meanwhile
	// (xpunode.ScannerConfig.Withheld). Nil: none.
	Withheld func() ([]string, error)
	// HealthInterval is how often the host is read again (default 10s).
	HealthInterval time.Duration
	// WatchInterval is how often the sockets are checked for a kubelet
	// restart, and for a kubelet that is not there yet (default 1s).
	WatchInterval time.Duration
	// SpecDirs are the CDI spec directories checked for the cdi-*
	// strategies (default: the CDI library's, as xpunode.Scanner has them).
	SpecDirs []string
	// Sharing is the time-slicing of each resource: Sharing.For(name)
	// says how many times each of its XPUs is advertised and under which
	// name (renameByDefault: baidu.com/xpu.shared,
	// baidu.com/xpu-24gb.shared). The zero value shares nothing.
	Sharing sharing.Policy
	// HostObserver, when set, is called with the result of every read of
	// the host (at start and at each health check), before the device list
	// is built: the command writes the node's labels from it. It must not
	// keep the host.
	HostObserver func(*discover.Host, error)
	// Metrics, when set, is where the plugin registers its metrics
	// (xpu_device_plugin_*; the daemon's own registry, which it serves).
	// Nil counts nothing anyone can read.
	Metrics prometheus.Registerer
	// Log is the logger; the default discards everything.
	Log logger.Interface
}

// withDefaults returns c with its defaults filled, or why c is unusable.
func (c Config) withDefaults() (*Config, error) {
	o := &c
	if o.ResourceName == "" {
		o.ResourceName = DefaultResourceName
	}
	if o.PartitionStrategy == "" {
		o.PartitionStrategy = PartitionMixed
	}
	if o.Kind == "" {
		o.Kind = cdispec.DefaultKind
	}
	if o.Strategy == "" {
		o.Strategy = StrategyCDICRI
	}
	if o.PluginDir == "" {
		o.PluginDir = DefaultPluginDir
	}
	if o.Discover == nil {
		o.Discover = func() (*discover.Host, error) { return discover.Discover() }
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = DefaultHealthInterval
	}
	if o.WatchInterval <= 0 {
		o.WatchInterval = DefaultWatchInterval
	}
	o.Log = logger.OrDiscard(o.Log)
	if err := ValidateResourceName(o.ResourceName); err != nil {
		return nil, err
	}
	if _, err := ParseStrategy(string(o.Strategy)); err != nil {
		return nil, err
	}
	if _, err := ParsePartitionStrategy(string(o.PartitionStrategy)); err != nil {
		return nil, err
	}
	if err := ValidateResourceName(o.Sharing.For(o.ResourceName).ResourceName); err != nil {
		return nil, fmt.Errorf("the shared resource name: %w", err)
	}
	return o, nil
}

var (
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	resourcePart = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
)

// ValidateResourceName checks an extended resource name the way the kubelet
// does: DOMAIN/NAME with DOMAIN a DNS subdomain outside kubernetes.io and
// NAME at most 63 characters of letters, digits, '-', '_' and '.'.
func ValidateResourceName(name string) error {
	domain, n, ok := strings.Cut(name, "/")
	switch {
	case !ok || domain == "" || n == "":
		return fmt.Errorf("resource name %q is not DOMAIN/NAME (e.g. %s)", name, DefaultResourceName)
	case len(domain) > 253 || !dnsSubdomain.MatchString(domain):
		return fmt.Errorf("resource name %q: %q is not a lower-case DNS subdomain", name, domain)
	case domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io"):
		return fmt.Errorf("resource name %q: the kubernetes.io domain is reserved for Kubernetes", name)
	case len(n) > 63 || !resourcePart.MatchString(n):
		return fmt.Errorf("resource name %q: %q must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", name, n)
	}
	return nil
}

// apiOptions are the options the plugin announces.
func apiOptions() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}
}
