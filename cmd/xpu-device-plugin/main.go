// Command xpu-device-plugin is the Kubernetes device plugin of xpu-cdi: it
// advertises the node's Kunlun XPUs to the kubelet as an extended resource
// and hands them to containers as CDI device names.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
	"github.com/xpu-cdi/xpu-cdi/internal/daemon"
	"github.com/xpu-cdi/xpu-cdi/internal/deviceplugin"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
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
		fmt.Fprintf(os.Stderr, "xpu-device-plugin: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	host           cmdflags.Host
	level          cmdflags.LogLevel
	kind           cmdflags.Kind
	specDirs       cmdflags.SpecDirs
	pluginPath     string
	resourceName   string
	strategy       string
	healthInterval time.Duration
	healthAddress  string
	parsedStrategy deviceplugin.Strategy
	partitions     string
	partitionStrat deviceplugin.PartitionStrategy
	configFile     string
	sharingFlags   sharing.Flags
	sharing        sharing.Policy
	labelsFile     string
	removeLabels   bool
}

func newApp(log *logrus.Logger) *cli.App {
	o := &options{}
	return &cli.App{
		Name:    "xpu-device-plugin",
		Usage:   "Kubernetes device plugin that offers Kunlun XPUs as CDI devices",
		Version: fmt.Sprintf("%s (commit %s)", version, commit),
		Description: `Advertises the node's Kunlun XPUs (found as xpu-cdi finds them, one per /dev/xpuN that can
run work, identified by its index) to the kubelet as the extended resource --resource-name, with
each device's NUMA node, and re-sends the list when the host changes. A device is Unhealthy while
the driver reports an error state for it (/proc/xpu/devN/state) or, for the cdi-* strategies,
while no CDI spec names it.

When the kubelet allocates XPUs to a container the answer depends on --device-list-strategy:
  cdi-cri          the CRI CDIDevices field (baidu.com/xpu=0 ...): containerd 2.x, CRI-O
  cdi-annotations  a cdi.k8s.io/ annotation: containerd 1.6 through xpu-container-runtime
  volume-mounts    /dev/null mounted at /var/run/xpu-container-devices/<id>: xpu-container-runtime
                   as the runtime of engines that forward neither (a pod cannot forge the mount;
                   the removed envvar strategy it could, with XPU_VISIBLE_DEVICES=all)

The cdi-* strategies need a CDI spec on the node:
  xpu-cdi generate --output /etc/cdi/baidu.com-xpu.yaml

SR-IOV partitions (VFs of a P800 cut in 2 or 4, of an R200 cut in 1 to 3) follow
--partition-strategy: mixed (the default) advertises whole cards as --resource-name and each
partition size as a resource of its own, RESOURCE-SIZE (baidu.com/xpu-48gb, baidu.com/xpu-24gb),
each registered on its own socket; a size that appears later is registered then, one that goes
advertises no device. single advertises every device as --resource-name and refuses to start
unless all are of one size. A node without partitions advertises --resource-name only.

Time-slicing (--replicas, or NVIDIA's sharing.timeSlicing configuration in --config-file)
advertises each XPU several times, as IDs N::k (replica k of /dev/xpuN); containers that get
replicas of one XPU share it with NO memory or fault isolation. A container given several
replicas gets distinct XPUs where it can, each XPU's CDI name once:
  version: v1
  sharing:
    timeSlicing:
      renameByDefault: false           # true: advertise baidu.com/xpu.shared
      failRequestsGreaterThanOne: false
      resources:
      - name: baidu.com/xpu
        replicas: 4
      - name: baidu.com/xpu-24gb        # each resource on its own; --replicas shares all
        replicas: 2

It waits for the kubelet, registers again when the kubelet restarts, and removes its socket on
SIGTERM. A node without XPU advertises zero devices (and says why) instead of exiting.`,
		Flags: append(o.host.Flags(), o.flags()...),
		Before: func(c *cli.Context) error {
			if err := o.level.Apply(log); err != nil {
				return err
			}
			// client-go (labels) and gRPC's klog users log through klog.
			if err := daemon.RouteKlog(log); err != nil {
				return err
			}
			return o.validate(c)
		},
		Action: func(c *cli.Context) error {
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return o.run(ctx, log)
		},
		HideHelpCommand: true,
	}
}

func (o *options) flags() []cli.Flag {
	return append(o.kind.Flags("of the devices handed out"),
		&cli.StringFlag{Name: "device-plugin-path", Usage: "the kubelet's device plugin `DIR` (its kubelet.sock; the plugin's socket is created there)", Value: deviceplugin.DefaultPluginDir, EnvVars: []string{"XPU_CDI_DEVICE_PLUGIN_PATH"}, Destination: &o.pluginPath},
		&cli.StringFlag{Name: "resource-name", Usage: "extended resource to advertise (e.g. kunlunxin.com/xpu on clusters that already use it)", Value: deviceplugin.DefaultResourceName, EnvVars: []string{"XPU_CDI_RESOURCE_NAME"}, Destination: &o.resourceName},
		&cli.StringFlag{Name: "device-list-strategy", Usage: "how allocated devices reach the container: cdi-cri, cdi-annotations or volume-mounts", Value: string(deviceplugin.StrategyCDICRI), EnvVars: []string{"XPU_CDI_DEVICE_LIST_STRATEGY"}, Destination: &o.strategy},
		&cli.StringFlag{Name: "partition-strategy", Usage: "how SR-IOV partitions (VFs) are advertised: mixed (whole cards as --resource-name, each partition size as RESOURCE-SIZE, e.g. baidu.com/xpu-24gb) or single (every device as --resource-name; refuses to start unless all are of one size)", Value: string(deviceplugin.PartitionMixed), EnvVars: []string{"XPU_CDI_PARTITION_STRATEGY"}, Destination: &o.partitions},
		&cli.DurationFlag{Name: "health-check-interval", Usage: "how often the devices' state and the CDI specs are read again", Value: deviceplugin.DefaultHealthInterval, EnvVars: []string{"XPU_CDI_HEALTH_CHECK_INTERVAL"}, Destination: &o.healthInterval},
		o.specDirs.Flag("cdi-spec-dir", "CDI spec directory checked for the cdi-* strategies"),
		&cli.StringFlag{Name: "config-file", Usage: "sharing configuration `FILE` (NVIDIA's format: version: v1, sharing.timeSlicing); not with --replicas, --rename-by-default, --fail-requests-greater-than-one", EnvVars: []string{"XPU_CDI_CONFIG_FILE", "CONFIG_FILE"}, Destination: &o.configFile},
		&cli.IntFlag{Name: "replicas", Usage: "advertise each XPU `N` times (time-slicing; no memory or fault isolation); 1 is no sharing", Value: 1, EnvVars: []string{"XPU_CDI_REPLICAS"}, Destination: &o.sharingFlags.Replicas},
		&cli.BoolFlag{Name: "rename-by-default", Usage: "with --replicas above 1, advertise RESOURCE.shared (baidu.com/xpu.shared)", EnvVars: []string{"XPU_CDI_RENAME_BY_DEFAULT"}, Destination: &o.sharingFlags.RenameByDefault},
		&cli.BoolFlag{Name: "fail-requests-greater-than-one", Usage: "with --replicas above 1, refuse a container asking for more than one replica", EnvVars: []string{"XPU_CDI_FAIL_REQUESTS_GREATER_THAN_ONE"}, Destination: &o.sharingFlags.FailRequestsGreaterThanOne},
		&cli.StringFlag{Name: "labels-file", Usage: "keep the node labels (baidu.com/xpu.*, with the sharing) in this NFD feature `FILE`, e.g. /etc/kubernetes/node-feature-discovery/features.d/xpu-device-plugin; its directory must exist", EnvVars: []string{"XPU_CDI_LABELS_FILE"}, Destination: &o.labelsFile},
		&cli.BoolFlag{Name: "remove-labels-on-exit", Usage: "remove --labels-file when stopped (SIGTERM): the node's labels go with the plugin", EnvVars: []string{"XPU_CDI_REMOVE_LABELS_ON_EXIT"}, Destination: &o.removeLabels},
		o.level.Flag(),
		daemon.HealthFlag(&o.healthAddress, DefaultHealthAddress),
	)
}

// DefaultHealthAddress is the health endpoint's address (the chart's probes
// use its port).
const DefaultHealthAddress = ":9508"

func (o *options) validate(c *cli.Context) error {
	if err := o.kind.Validate(); err != nil {
		return err
	}
	if err := deviceplugin.ValidateResourceName(o.resourceName); err != nil {
		return fmt.Errorf("--resource-name: %w", err)
	}
	s, err := deviceplugin.ParseStrategy(o.strategy)
	if err != nil {
		return fmt.Errorf("--device-list-strategy: %w", err)
	}
	o.parsedStrategy = s
	ps, err := deviceplugin.ParsePartitionStrategy(o.partitions)
	if err != nil {
		return fmt.Errorf("--partition-strategy: %w", err)
	}
	o.partitionStrat = ps
	if o.healthInterval < 100*time.Millisecond {
		return fmt.Errorf("--health-check-interval %s is too short: give at least 100ms (e.g. 10s)", o.healthInterval)
	}
	if o.pluginPath == "" {
		return errors.New("--device-plugin-path is empty: give the kubelet's device plugin directory, usually " + deviceplugin.DefaultPluginDir)
	}
	if o.removeLabels && o.labelsFile == "" {
		return errors.New("--remove-labels-on-exit needs --labels-file")
	}
	return o.loadSharing(c)
}

// loadSharing reads the sharing settings from --config-file or the flags
// of the common case, not both: which one would win is a guess.
func (o *options) loadSharing(c *cli.Context) error {
	if o.configFile == "" {
		s, err := sharing.PolicyFromFlags(o.resourceName, o.sharingFlags)
		if err != nil {
			return err
		}
		o.sharing = s
	} else {
		for _, f := range []string{"replicas", "rename-by-default", "fail-requests-greater-than-one"} {
			if c.IsSet(f) {
				return fmt.Errorf("--%s and --config-file %s both set sharing: give one (the file's sharing.timeSlicing, or the flags)", f, o.configFile)
			}
		}
		s, err := sharing.LoadPolicy(o.configFile, o.resourceName)
		if err != nil {
			return fmt.Errorf("--config-file: %w", err)
		}
		o.sharing = s
	}
	for _, name := range append([]string{o.sharing.For(o.resourceName).ResourceName}, o.sharing.Renames()...) {
		if err := deviceplugin.ValidateResourceName(name); err != nil {
			return fmt.Errorf("the shared resource name: %w", err)
		}
	}
	return nil
}

func (o *options) run(ctx context.Context, log *logrus.Logger) error {
	var lw *labelWriter
	var observe func(*discover.Host, error)
	if o.labelsFile != "" {
		lw = &labelWriter{path: o.labelsFile, sharing: o.sharing.For(o.resourceName), log: log}
		observe = lw.observe
	}
	reg := daemon.NewRegistry(deviceplugin.MetricsNamespace, version, commit)
	p, err := deviceplugin.New(deviceplugin.Config{
		HostObserver:      observe,
		Metrics:           reg,
		ResourceName:      o.resourceName,
		PartitionStrategy: o.partitionStrat,
		Kind:              o.kind.String(),
		Strategy:          o.parsedStrategy,
		PluginDir:         o.pluginPath,
		HealthInterval:    o.healthInterval,
		SpecDirs:          o.specDirs.Dirs(),
		Sharing:           o.sharing,
		Log:               log,
		Discover: func() (*discover.Host, error) {
			// Host warnings are not logged at every health check: the
			// plugin logs what changes what it advertises.
			return o.host.Discover(nil)
		},
		// The dev root stands for the host's / (--host-root sets both).
		Withheld: func() ([]string, error) { return partition.LayingOut(o.host.DevRoot) },
	})
	if err != nil {
		return err
	}
	whole := o.sharing.For(o.resourceName)
	log.Infof("xpu-device-plugin %s: resource %s, partition strategy %s, CDI kind %s, strategy %s, device plugin dir %s, dev root %s, sharing of %s: %s (%d replica(s) per XPU)",
		version, whole.ResourceName, o.partitionStrat, o.kind.String(), o.parsedStrategy, o.pluginPath, o.host.DevRoot, whole.ResourceName, whole.Strategy(), whole.Replicas)
	// Ready while registered with the kubelet and serving its socket.
	if err := daemon.StartHealth(ctx, o.healthAddress, p.Ready, log, daemon.WithMetrics(reg)); err != nil {
		return err
	}
	err = p.Run(ctx)
	if lw != nil && o.removeLabels {
		err = errors.Join(err, lw.remove())
	}
	return err
}
