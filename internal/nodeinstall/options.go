package nodeinstall

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// Defaults.
const (
	DefaultHostRoot   = "/host"
	DefaultHookDir    = "/opt/xpu-cdi/bin"
	DefaultHookSource = "/usr/bin/xpu-runtime-hook"
	DefaultSpecPath   = "/var/run/cdi/baidu.com-xpu.yaml"
	DefaultInterval   = 10 * time.Second
	// HookName is the installed hook's file name.
	HookName = "xpu-runtime-hook"
	// createdMarker in the hook directory says Install created it, so that
	// Uninstall may remove it.
	createdMarker = ".xpu-cdi-created"
	// maxHookSize bounds the hook binary read (a static Go binary is a few MB).
	maxHookSize = 256 << 20
)

type options struct {
	hostRoot   string
	devRoot    string
	driverRoot string
	hookDir    string
	hookSource string
	specPath   string
	settings   cdispec.Settings
	interval   time.Duration
	discover   func(root string) (*discover.Host, error)
	labelsFile string
	sharing    *sharing.Config
	log        logger.Interface
}

// Option configures New.
type Option func(*options)

// WithHostRoot sets where the host's / is mounted (default /host).
func WithHostRoot(dir string) Option { return func(o *options) { o.hostRoot = dir } }

// WithDevRoot sets where the host's /dev, /proc and /sys are, as the host
// names it (default /): a driver container's tree, say. The spec's host
// paths then start with it.
func WithDevRoot(dir string) Option { return func(o *options) { o.devRoot = dir } }

// WithDriverRoot sets where the driver's user-space files are, as the host
// names it (default /).
func WithDriverRoot(dir string) Option { return func(o *options) { o.driverRoot = dir } }

// WithHookDir sets the host directory the hook is installed into, as the
// host names it (default /opt/xpu-cdi/bin).
func WithHookDir(dir string) Option { return func(o *options) { o.hookDir = dir } }

// WithHookSource sets the hook binary to install (default the image's
// /usr/bin/xpu-runtime-hook).
func WithHookSource(p string) Option { return func(o *options) { o.hookSource = p } }

// WithSpecPath sets the spec file on the host, as the host names it
// (default /var/run/cdi/baidu.com-xpu.yaml).
func WithSpecPath(p string) Option { return func(o *options) { o.specPath = p } }

// WithSettings sets the spec's settings (kind, names, nodes only); the hook
// path and the host root are the installer's own.
func WithSettings(s cdispec.Settings) Option { return func(o *options) { o.settings = s } }

// WithInterval sets how often the host is read again.
func WithInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }

// WithDiscover replaces how the host is read below its root (tests); f is
// given the host root.
func WithDiscover(f func(root string) (*discover.Host, error)) Option {
	return func(o *options) { o.discover = f }
}

// WithLabels keeps the node labels (package labels) in the NFD feature
// file path on the host, as the host names it, with the sharing labels of s
// when s is not nil. The file is written only where its directory exists
// (NFD installed), and removed while the host has no usable XPU and by
// Uninstall.
func WithLabels(path string, s *sharing.Config) Option {
	return func(o *options) { o.labelsFile, o.sharing = path, s }
}

// WithLogger sets the logger; the default discards everything.
func WithLogger(l logger.Interface) Option { return func(o *options) { o.log = l } }

func newOptions(opts []Option) (*options, error) {
	o := &options{}
	for _, opt := range opts {
		opt(o)
	}
	if o.hostRoot == "" {
		o.hostRoot = DefaultHostRoot
	}
	if o.hookDir == "" {
		o.hookDir = DefaultHookDir
	}
	if o.devRoot == "" {
		o.devRoot = "/"
	}
	if o.driverRoot == "" {
		o.driverRoot = "/"
	}
	if o.hookSource == "" {
		o.hookSource = DefaultHookSource
	}
	if o.specPath == "" {
		o.specPath = DefaultSpecPath
	}
	if o.interval <= 0 {
		o.interval = DefaultInterval
	}
	if o.discover == nil {
		devRoot, driverRoot := path.Join(o.hostRoot, o.devRoot), path.Join(o.hostRoot, o.driverRoot)
		o.discover = func(string) (*discover.Host, error) {
			return discover.Discover(discover.WithDevRoot(devRoot), discover.WithDriverRoot(driverRoot))
		}
	}
	o.log = logger.OrDiscard(o.log)
	if st, err := os.Stat(o.hostRoot); err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return nil, fmt.Errorf("host root %s: %w (mount the host's / there)", o.hostRoot, err)
	}
	for _, p := range []struct{ flag, value string }{{"dev root", o.devRoot}, {"driver root", o.driverRoot}} {
		if !path.IsAbs(p.value) || path.Clean(p.value) != p.value {
			return nil, fmt.Errorf("%s %q: give a clean absolute path as the host names it", p.flag, p.value)
		}
	}
	paths := []struct{ flag, value string }{{"hook directory", o.hookDir}, {"spec path", o.specPath}}
	if o.labelsFile != "" {
		paths = append(paths, struct{ flag, value string }{"labels file", o.labelsFile})
		if strings.HasPrefix(path.Base(o.labelsFile), ".") {
			return nil, fmt.Errorf("labels file %s: NFD ignores files whose name starts with a dot", o.labelsFile)
		}
	}
	for _, p := range paths {
		if !path.IsAbs(p.value) || path.Clean(p.value) != p.value || p.value == "/" {
			return nil, fmt.Errorf("%s %q: give a clean absolute path as the host names it (e.g. %s)", p.flag, p.value, map[string]string{"hook directory": DefaultHookDir, "spec path": DefaultSpecPath, "labels file": "/etc/kubernetes/node-feature-discovery/features.d/xpu-cdi"}[p.flag])
		}
	}
	if _, err := cdispec.FormatForPath(o.specPath); err != nil {
		return nil, fmt.Errorf("spec path: %w", err)
	}
	return o, nil
}
