package deviceplugin

import (
	"fmt"
	"regexp"
	"strings"
	"time"

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

type options struct {
	resourceName   string
	kind           string
	strategy       Strategy
	pluginDir      string
	discover       DiscoverFunc
	healthInterval time.Duration
	watchInterval  time.Duration
	specDirs       []string
	sharing        sharing.Config
	observe        func(*discover.Host, error)
	log            logger.Interface
}

// Option configures New.
type Option func(*options)

// WithResourceName sets the extended resource (default baidu.com/xpu).
func WithResourceName(name string) Option { return func(o *options) { o.resourceName = name } }

// WithKind sets the CDI kind (vendor/class) of the names Allocate returns.
func WithKind(kind string) Option { return func(o *options) { o.kind = kind } }

// WithStrategy sets the device list strategy (default cdi-cri).
func WithStrategy(s Strategy) Option { return func(o *options) { o.strategy = s } }

// WithPluginDir sets the kubelet's device plugin directory, where the
// kubelet's socket is and the plugin's socket is created.
func WithPluginDir(dir string) Option { return func(o *options) { o.pluginDir = dir } }

// WithDiscover sets how the host is read (default discover.Discover()).
func WithDiscover(f DiscoverFunc) Option { return func(o *options) { o.discover = f } }

// WithHealthInterval sets how often the host is read again.
func WithHealthInterval(d time.Duration) Option { return func(o *options) { o.healthInterval = d } }

// WithWatchInterval sets how often the sockets are checked for a kubelet
// restart (and for a kubelet that is not there yet).
func WithWatchInterval(d time.Duration) Option { return func(o *options) { o.watchInterval = d } }

// WithSpecDirs sets the CDI spec directories checked for the cdi-* strategies
// (default: the CDI library's, as xpunode.Scanner has them).
func WithSpecDirs(dirs ...string) Option {
	return func(o *options) { o.specDirs = append([]string{}, dirs...) }
}

// WithSharing advertises each XPU c.Replicas times (time-slicing) under
// c.ResourceName when it is set (renameByDefault: baidu.com/xpu.shared).
func WithSharing(c sharing.Config) Option { return func(o *options) { o.sharing = c } }

// WithHostObserver has f called with the result of every read of the host
// (at start and at each health check), before the device list is built: the
// command writes the node's labels from it. f must not keep the host.
func WithHostObserver(f func(*discover.Host, error)) Option {
	return func(o *options) { o.observe = f }
}

// WithLogger sets the logger; the default discards everything.
func WithLogger(l logger.Interface) Option { return func(o *options) { o.log = l } }

func newOptions(opts []Option) (*options, error) {
	o := &options{}
	for _, opt := range opts {
		opt(o)
	}
	if o.resourceName == "" {
		o.resourceName = DefaultResourceName
	}
	if o.sharing.Replicas < 1 {
		o.sharing.Replicas = 1
	}
	if o.sharing.ResourceName != "" {
		o.resourceName = o.sharing.ResourceName
	}
	if o.kind == "" {
		o.kind = cdispec.DefaultKind
	}
	if o.strategy == "" {
		o.strategy = StrategyCDICRI
	}
	if o.pluginDir == "" {
		o.pluginDir = DefaultPluginDir
	}
	if o.discover == nil {
		o.discover = func() (*discover.Host, error) { return discover.Discover() }
	}
	if o.healthInterval <= 0 {
		o.healthInterval = DefaultHealthInterval
	}
	if o.watchInterval <= 0 {
		o.watchInterval = DefaultWatchInterval
	}
	o.log = logger.OrDiscard(o.log)
	if err := ValidateResourceName(o.resourceName); err != nil {
		return nil, err
	}
	if _, err := ParseStrategy(string(o.strategy)); err != nil {
		return nil, err
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

// socketName is the plugin's socket in the plugin directory, derived from
// the resource name so that two plugins for two resources do not collide.
func (o *options) socketName() string {
	return "xpu-" + strings.ReplaceAll(o.resourceName, "/", "_") + ".sock"
}

// apiOptions are the options the plugin announces.
func apiOptions() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}
}
