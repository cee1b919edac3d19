package nodeinstall

import (
	"context"
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
	DefaultSpecPath   = cdispec.DefaultSpecPath
	DefaultInterval   = 10 * time.Second
	// HookName is the installed hook's file name.
	HookName = "xpu-runtime-hook"
	// createdMarker in the hook directory says Install created it, so that
	// Uninstall may remove it.
	createdMarker = ".xpu-cdi-created"
	// maxHookSize bounds the hook binary read (a static Go binary is a few MB).
	maxHookSize = 256 << 20
)

// Config configures New; zero fields take the defaults.
type Config struct {
	// HostRoot is where the host's / is mounted (default /host).
	HostRoot string
	// DevRoot is where the host's /dev, /proc and /sys are, as the host
	// names it (default /): a driver container's tree, say. The spec's host
	// paths then start with it.
	DevRoot string
	// DriverRoot is where the driver's user-space files are, as the host
	// names it (default /).
	DriverRoot string
	// HookDir is the host directory the hook is installed into, as the
	// host names it (default /opt/xpu-cdi/bin).
	HookDir string
	// HookSource is the hook binary to install (default the image's
	// /usr/bin/xpu-runtime-hook).
	HookSource string
	// SpecPath is the spec file on the host, as the host names it
	// (default /etc/cdi/baidu.com-xpu.yaml, cdispec.DefaultSpecPath).
	SpecPath string
	// Settings are the spec's settings (kind, names, nodes only); the hook
	// path and the host root are the installer's own.
	Settings cdispec.Settings
	// Interval is how often the host is read again (default 10s).
	Interval time.Duration
	// Discover replaces how the host is read below its root (tests); it is
	// given the host root.
	Discover func(root string) (*discover.Host, error)
	// LabelsFile, when set, keeps the node labels (package labels) in this
	// NFD feature file on the host, as the host names it, with the sharing
	// labels of Sharing when Sharing is not nil. The file is written only
	// where its directory exists (NFD installed), and removed while the
	// host has no usable XPU and by Uninstall.
	LabelsFile string
	Sharing    *sharing.Config
	// ResourceName is the device plugin's resource, which names the
	// partition-count labels (default names.ResourceName).
	ResourceName string
	// Partitions, when set, is the partition layout kept on the node: laid
	// out before the spec is written (Partitions). The labels file then
	// leaves the layout label out: the node label is the admin's.
	Partitions *Partitions
	// LockSpec, when set, is taken before the host is read for the spec
	// and held until the spec is written: the node's layout lock
	// (sriov.LockLayout), which whoever cuts cards (partition apply, the
	// DRA driver's dynamic partitions) holds from its first write until it
	// has rewritten the spec. Without it a pass could read a card half cut
	// and then write its stale spec over the cutter's. When the lock
	// cannot be had, the pass leaves the spec as it is and says why.
	LockSpec func(ctx context.Context) (unlock func(), err error)
	// Log is the logger; the default discards everything.
	Log logger.Interface
}

// withDefaults returns c with its defaults filled, or why c is unusable.
func (c Config) withDefaults() (*Config, error) {
	o := &c
	if o.HostRoot == "" {
		o.HostRoot = DefaultHostRoot
	}
	if o.HookDir == "" {
		o.HookDir = DefaultHookDir
	}
	if o.DevRoot == "" {
		o.DevRoot = "/"
	}
	if o.DriverRoot == "" {
		o.DriverRoot = "/"
	}
	if o.HookSource == "" {
		o.HookSource = DefaultHookSource
	}
	if o.SpecPath == "" {
		o.SpecPath = DefaultSpecPath
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Discover == nil {
		devRoot, driverRoot := path.Join(o.HostRoot, o.DevRoot), path.Join(o.HostRoot, o.DriverRoot)
		o.Discover = func(string) (*discover.Host, error) {
			return discover.Discover(discover.WithDevRoot(devRoot), discover.WithDriverRoot(driverRoot))
		}
	}
	o.Log = logger.OrDiscard(o.Log)
	if st, err := os.Stat(o.HostRoot); err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return nil, fmt.Errorf("host root %s: %w (mount the host's / there)", o.HostRoot, err)
	}
	for _, p := range []struct{ flag, value string }{{"dev root", o.DevRoot}, {"driver root", o.DriverRoot}} {
		if !path.IsAbs(p.value) || path.Clean(p.value) != p.value {
			return nil, fmt.Errorf("%s %q: give a clean absolute path as the host names it", p.flag, p.value)
		}
	}
	paths := []struct{ flag, value string }{{"hook directory", o.HookDir}, {"spec path", o.SpecPath}}
	if o.LabelsFile != "" {
		paths = append(paths, struct{ flag, value string }{"labels file", o.LabelsFile})
		if strings.HasPrefix(path.Base(o.LabelsFile), ".") {
			return nil, fmt.Errorf("labels file %s: NFD ignores files whose name starts with a dot", o.LabelsFile)
		}
	}
	for _, p := range paths {
		if !path.IsAbs(p.value) || path.Clean(p.value) != p.value || p.value == "/" {
			return nil, fmt.Errorf("%s %q: give a clean absolute path as the host names it (e.g. %s)", p.flag, p.value, map[string]string{"hook directory": DefaultHookDir, "spec path": DefaultSpecPath, "labels file": "/etc/kubernetes/node-feature-discovery/features.d/xpu-cdi"}[p.flag])
		}
	}
	if o.Partitions != nil {
		if o.Partitions.Apply == nil {
			return nil, errNoApply
		}
		p := *o.Partitions
		if p.LabelInterval <= 0 {
			p.LabelInterval = DefaultLabelInterval
		}
		o.Partitions = &p
	}
	if _, err := cdispec.FormatForPath(o.SpecPath); err != nil {
		return nil, fmt.Errorf("spec path: %w", err)
	}
	return o, nil
}
