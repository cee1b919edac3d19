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
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/common"
	"github.com/xpu-cdi/xpu-cdi/internal/deviceplugin"
	"github.com/xpu-cdi/xpu-cdi/internal/flagutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
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
	host           common.HostOptions
	level          string
	vendor         string
	class          string
	pluginPath     string
	resourceName   string
	strategy       string
	healthInterval time.Duration
	specDirs       cli.StringSlice
	parsedStrategy deviceplugin.Strategy
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
  xpu-cdi generate --output /var/run/cdi/baidu.com-xpu.yaml

It waits for the kubelet, registers again when the kubelet restarts, and removes its socket on
SIGTERM. A node without XPU advertises zero devices (and says why) instead of exiting.`,
		Flags: append(o.host.Flags(), o.flags()...),
		Before: func(*cli.Context) error {
			l, err := logrus.ParseLevel(o.level)
			if err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log.SetLevel(l)
			return o.validate()
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
	return []cli.Flag{
		&cli.StringFlag{Name: "vendor", Usage: "vendor part of the CDI kind of the devices handed out", Value: cdispec.DefaultVendor, EnvVars: []string{"XPU_CDI_VENDOR"}, Destination: &o.vendor},
		&cli.StringFlag{Name: "class", Usage: "class part of the CDI kind of the devices handed out", Value: cdispec.DefaultClass, EnvVars: []string{"XPU_CDI_CLASS"}, Destination: &o.class},
		&cli.StringFlag{Name: "device-plugin-path", Usage: "the kubelet's device plugin `DIR` (its kubelet.sock; the plugin's socket is created there)", Value: deviceplugin.DefaultPluginDir, EnvVars: []string{"XPU_CDI_DEVICE_PLUGIN_PATH"}, Destination: &o.pluginPath},
		&cli.StringFlag{Name: "resource-name", Usage: "extended resource to advertise (e.g. kunlunxin.com/xpu on clusters that already use it)", Value: deviceplugin.DefaultResourceName, EnvVars: []string{"XPU_CDI_RESOURCE_NAME"}, Destination: &o.resourceName},
		&cli.StringFlag{Name: "device-list-strategy", Usage: "how allocated devices reach the container: cdi-cri, cdi-annotations or volume-mounts", Value: string(deviceplugin.StrategyCDICRI), EnvVars: []string{"XPU_CDI_DEVICE_LIST_STRATEGY"}, Destination: &o.strategy},
		&cli.DurationFlag{Name: "health-check-interval", Usage: "how often the devices' state and the CDI specs are read again", Value: deviceplugin.DefaultHealthInterval, EnvVars: []string{"XPU_CDI_HEALTH_CHECK_INTERVAL"}, Destination: &o.healthInterval},
		&cli.StringSliceFlag{Name: "cdi-spec-dir", Usage: "CDI spec directory checked for the cdi-* strategies (repeatable); default: /etc/cdi and /var/run/cdi", EnvVars: []string{"XPU_CDI_SPEC_DIRS"}, Destination: &o.specDirs},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "panic, fatal, error, warning, info, debug or trace", EnvVars: []string{"XPU_CDI_LOG_LEVEL"}, Destination: &o.level},
	}
}

func (o *options) validate() error {
	if err := cdispec.ValidateKind(o.vendor, o.class); err != nil {
		return fmt.Errorf("--vendor/--class: %w", err)
	}
	if err := deviceplugin.ValidateResourceName(o.resourceName); err != nil {
		return fmt.Errorf("--resource-name: %w", err)
	}
	s, err := deviceplugin.ParseStrategy(o.strategy)
	if err != nil {
		return fmt.Errorf("--device-list-strategy: %w", err)
	}
	o.parsedStrategy = s
	if o.healthInterval < 100*time.Millisecond {
		return fmt.Errorf("--health-check-interval %s is too short: give at least 100ms (e.g. 10s)", o.healthInterval)
	}
	if o.pluginPath == "" {
		return errors.New("--device-plugin-path is empty: give the kubelet's device plugin directory, usually " + deviceplugin.DefaultPluginDir)
	}
	return nil
}

func (o *options) run(ctx context.Context, log *logrus.Logger) error {
	dirs := flagutil.SplitList(o.specDirs.Value())
	if len(dirs) == 0 {
		dirs = cdiapi.DefaultSpecDirs
	}
	p, err := deviceplugin.New(
		deviceplugin.WithResourceName(o.resourceName),
		deviceplugin.WithKind(cdispec.Kind(o.vendor, o.class)),
		deviceplugin.WithStrategy(o.parsedStrategy),
		deviceplugin.WithPluginDir(o.pluginPath),
		deviceplugin.WithHealthInterval(o.healthInterval),
		deviceplugin.WithSpecDirs(dirs...),
		deviceplugin.WithLogger(log),
		deviceplugin.WithDiscover(func() (*discover.Host, error) {
			// Host warnings are not logged at every health check: the
			// plugin logs what changes what it advertises.
			return o.host.Discover(nil)
		}),
	)
	if err != nil {
		return err
	}
	log.Infof("xpu-device-plugin %s: resource %s, CDI kind %s/%s, strategy %s, device plugin dir %s, dev root %s",
		version, o.resourceName, o.vendor, o.class, o.parsedStrategy, o.pluginPath, o.host.DevRoot)
	return p.Run(ctx)
}
