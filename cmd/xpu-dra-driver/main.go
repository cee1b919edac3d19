// Command xpu-dra-driver is the Kubernetes Dynamic Resource Allocation
// driver of xpu-cdi: a kubelet plugin that publishes the node's Kunlun XPUs
// in a ResourceSlice and prepares claims for them as CDI device names.
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags/kubeclient"
	"github.com/xpu-cdi/xpu-cdi/internal/daemon"
	"github.com/xpu-cdi/xpu-cdi/internal/dra"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Set by the linker (-X main.version=... -X main.commit=...).
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	log := logrus.New()
	log.SetOutput(os.Stderr)
	if err := newApp(log).Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "xpu-dra-driver: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	host          cmdflags.Host
	level         cmdflags.LogLevel
	kind          cmdflags.Kind
	specDirs      cmdflags.SpecDirs
	kube          kubeclient.Flags
	driverName    string
	nodeName      string
	pollInterval  time.Duration
	pluginDataDir string
	registryDir   string
	podUID        string
	healthAddress string
}

// DefaultHealthAddress is the health endpoint's address (the chart's probes
// use its port).
const DefaultHealthAddress = ":9509"

const description = `Publishes the node's Kunlun XPUs (found as xpu-cdi finds them: one device per /dev/xpuN
that can run work, named xpu-N) in the node's ResourceSlice of driver --driver-name, with
attributes for what the host tells (index, model, family, PCI bus ID and PCIe root, NUMA node,
SR-IOV role, serial, driver and XRE versions) and the memory capacity, and publishes it again
when the host changes. A device that cannot run work (an error state in /proc/xpu/devN/state, no
/dev/xpuctrl, no CDI spec naming it) is tainted NoSchedule with the key <driver-name>/unhealthy.

Prepare answers the CDI names of the node's spec (baidu.com/xpu=N), which containerd 2.x and
CRI-O resolve; the spec must exist:
  xpu-cdi generate --output /etc/cdi/baidu.com-xpu.yaml
(the xpu-cdi package's xpu-cdi-refresh service re-creates it at boot). Pods that share one
claim share its XPUs by time-slicing, without memory or fault isolation.

It waits for the kubelet's plugin registry, records prepared claims in --plugin-data-dir, and
publishes an empty slice on a node without XPU instead of exiting. With --pod-uid (POD_UID) the
old and the new driver of a rolling update answer side by side, sharing those records.

  xpu-dra-driver print-slice --dev-root R --driver-root R [--node-name N]
prints the ResourceSlice it would publish for a host, without a cluster.`

func newApp(log *logrus.Logger) *cli.App {
	o := &options{}
	return &cli.App{
		Name:        "xpu-dra-driver",
		Usage:       "Kubernetes DRA driver that offers Kunlun XPUs as CDI devices",
		Version:     fmt.Sprintf("%s (commit %s)", version, commit),
		Description: description,
		Flags:       append(o.commonFlags(), o.serveFlags()...),
		// Checked in Action, not Before: the app's Before also runs before
		// print-slice, whose flags are not parsed yet.
		Action: func(c *cli.Context) error {
			if err := o.setLevel(log); err != nil {
				return err
			}
			if err := o.validate(true); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return o.serve(ctx, log)
		},
		Commands: []*cli.Command{{
			Name:      "print-slice",
			Usage:     "print, as YAML, the ResourceSlice this node would publish (no cluster needed)",
			UsageText: "xpu-dra-driver print-slice [--dev-root R] [--driver-root R] [--node-name N]",
			Flags:     o.commonFlags(),
			Before: func(*cli.Context) error {
				if err := o.setLevel(log); err != nil {
					return err
				}
				if o.nodeName == "" {
					h, err := os.Hostname()
					if err != nil {
						return fmt.Errorf("--node-name not given and the host name is unknown: %w", err)
					}
					o.nodeName = h
				}
				return o.validate(false)
			},
			Action: func(c *cli.Context) error { return o.printSlice(c, log) },
		}},
		HideHelpCommand: true,
	}
}

// commonFlags are the flags of both the driver and print-slice (new
// instances bound to the same options at each call).
func (o *options) commonFlags() []cli.Flag {
	flags := append(o.host.Flags(), o.kind.Flags("of the names Prepare answers")...)
	return append(flags,
		&cli.StringFlag{Name: "driver-name", Usage: "DRA driver name: the ResourceSlice's driver and the domain of the attributes", Value: dra.DefaultDriverName, EnvVars: []string{"XPU_CDI_DRA_DRIVER_NAME"}, Destination: &o.driverName},
		&cli.StringFlag{Name: "node-name", Usage: "the node (and pool) the slice is published for; print-slice defaults to the host name", EnvVars: []string{"NODE_NAME", "XPU_CDI_NODE_NAME"}, Destination: &o.nodeName},
		o.specDirs.Flag("cdi-spec-dir", "CDI spec directory checked for the node spec"),
		o.level.Flag(),
	)
}

func (o *options) serveFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "poll-interval", Usage: "how often the devices' state and the CDI specs are read again", Value: dra.DefaultPollInterval, EnvVars: []string{"XPU_CDI_POLL_INTERVAL"}, Destination: &o.pollInterval},
		o.kube.Flag(),
		&cli.StringFlag{Name: "plugin-data-dir", Usage: "the plugin's `DIR` (its DRA socket and the records of prepared claims); default: /var/lib/kubelet/plugins/<driver-name>", EnvVars: []string{"XPU_CDI_PLUGIN_DATA_DIR"}, Destination: &o.pluginDataDir},
		&cli.StringFlag{Name: "plugin-registry-dir", Usage: "the kubelet's plugin registration `DIR`", Value: kubeletplugin.KubeletRegistryDir, EnvVars: []string{"XPU_CDI_PLUGIN_REGISTRY_DIR"}, Destination: &o.registryDir},
		&cli.StringFlag{Name: "pod-uid", Usage: "the `UID` of the driver's pod (downward API metadata.uid): registers sockets of its own, so that during a DaemonSet's rolling update (maxSurge) the old and the new driver answer side by side (kubelet 1.33+); empty: one driver per node", EnvVars: []string{"POD_UID", "XPU_CDI_POD_UID"}, Destination: &o.podUID},
		daemon.HealthFlag(&o.healthAddress, DefaultHealthAddress),
	}
}

// setLevel applies --log-level to log and to klog, through which client-go
// and the helper library log.
func (o *options) setLevel(log *logrus.Logger) error {
	if err := o.level.Apply(log); err != nil {
		return err
	}
	return daemon.RouteKlog(log)
}

func (o *options) validate(serve bool) error {
	if err := o.kind.Validate(); err != nil {
		return err
	}
	if err := dra.ValidateDriverName(o.driverName); err != nil {
		return fmt.Errorf("--driver-name: %w", err)
	}
	if o.nodeName == "" {
		return errors.New("--node-name (or NODE_NAME) is empty: give the node's name, in a DaemonSet from the downward API (fieldRef spec.nodeName)")
	}
	if !serve {
		return nil
	}
	if o.pollInterval < 100*time.Millisecond {
		return fmt.Errorf("--poll-interval %s is too short: give at least 100ms (e.g. 10s)", o.pollInterval)
	}
	if o.pluginDataDir == "" {
		o.pluginDataDir = filepath.Join(kubeletplugin.KubeletPluginsDir, o.driverName)
	}
	if o.registryDir == "" {
		return errors.New("--plugin-registry-dir is empty: give the kubelet's plugin registration directory, usually " + kubeletplugin.KubeletRegistryDir)
	}
	return nil
}

// driverConfig is the driver's configuration from the flags; serve adds
// the state directory and the poll interval.
func (o *options) driverConfig(log *logrus.Logger) dra.Config {
	return dra.Config{
		DriverName: o.driverName,
		NodeName:   o.nodeName,
		Kind:       o.kind.String(),
		SpecDirs:   o.specDirs.Dirs(),
		Log:        log,
		Discover: func() (*discover.Host, error) {
			// Host warnings are not logged at every poll: the driver logs
			// what changes what it publishes.
			return o.host.Discover(nil)
		},
		// The dev root stands for the host's / (--host-root sets both).
		Withheld: func() ([]string, error) { return partition.LayingOut(o.host.DevRoot) },
	}
}

func (o *options) printSlice(c *cli.Context, log *logrus.Logger) error {
	d, err := dra.New(o.driverConfig(log))
	if err != nil {
		return err
	}
	d.Refresh()
	for i, s := range d.Slices() {
		out, err := yaml.Marshal(s)
		if err != nil {
			return fmt.Errorf("encoding the ResourceSlice: %w", err)
		}
		if i > 0 {
			out = append([]byte("---\n"), out...)
		}
		if _, err := c.App.Writer.Write(out); err != nil {
			return err
		}
	}
	return nil
}

// waitForDir returns when dir exists, saying once that it waits: the
// kubelet creates its plugin registry when it starts, and a driver started
// first must not crash-loop.
func waitForDir(ctx context.Context, dir string, log *logrus.Logger) error {
	said := false
	for {
		st, err := os.Stat(dir)
		switch {
		case err == nil && st.IsDir():
			if said {
				log.Infof("the kubelet's plugin registry %s is there", dir)
			}
			return nil
		case err == nil:
			return fmt.Errorf("--plugin-registry-dir %s is not a directory", dir)
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("--plugin-registry-dir: %w", err)
		}
		if !said {
			log.Warnf("waiting for the kubelet: its plugin registry %s does not exist yet", dir)
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (o *options) serve(ctx context.Context, log *logrus.Logger) error {
	client, err := o.kube.Client()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.pluginDataDir, 0o750); err != nil {
		return fmt.Errorf("--plugin-data-dir: %w", err)
	}
	cfg := o.driverConfig(log)
	cfg.StateDir = filepath.Join(o.pluginDataDir, "claims")
	cfg.PollInterval = o.pollInterval
	reg := daemon.NewRegistry(dra.MetricsNamespace, version, commit)
	cfg.Metrics = reg
	d, err := dra.New(cfg)
	if err != nil {
		return err
	}
	// Ready once the kubelet registered the plugin and the API server took
	// its slices (the helper's RegistrationStatus is read unlocked, as the
	// library offers it).
	var helperOf atomic.Pointer[kubeletplugin.Helper]
	ready := func() error {
		h := helperOf.Load()
		if h == nil {
			return fmt.Errorf("waiting for the kubelet's plugin registry %s", o.registryDir)
		}
		return d.Ready(h.RegistrationStatus())
	}
	if err := daemon.StartHealth(ctx, o.healthAddress, ready, log, daemon.WithMetrics(reg)); err != nil {
		return err
	}
	if err := waitForDir(ctx, o.registryDir, log); err != nil {
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	helper, err := kubeletplugin.Start(ctx, d, append([]kubeletplugin.Option{
		kubeletplugin.DriverName(o.driverName),
		kubeletplugin.NodeName(o.nodeName),
		kubeletplugin.KubeClient(d.ObservedClient(client)),
		kubeletplugin.PluginDataDirectoryPath(o.pluginDataDir),
		kubeletplugin.RegistrarDirectoryPath(o.registryDir),
		kubeletplugin.RollingUpdate(types.UID(o.podUID)),
	}, dra.SocketOptions()...)...)
	if err != nil {
		return fmt.Errorf("starting the kubelet plugin %s: %w", o.driverName, err)
	}
	defer helper.Stop()
	helperOf.Store(helper)
	rolling := "off (no --pod-uid)"
	if o.podUID != "" {
		rolling = "on, pod " + o.podUID
	}
	log.Infof("xpu-dra-driver %s: driver %s, node %s, CDI kind %s, plugin dir %s, dev root %s, rolling updates %s",
		version, o.driverName, o.nodeName, o.kind.String(), o.pluginDataDir, o.host.DevRoot, rolling)
	return d.Run(ctx, helper)
}
