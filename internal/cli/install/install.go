// Package install is `xpu-cdi install` and `xpu-cdi uninstall`: the
// DaemonSet mode that sets up a node with only the Kunlun driver (package
// nodeinstall) from a container that mounts the host's / at --host-root.
package install

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
	"github.com/xpu-cdi/xpu-cdi/internal/flagutil"
	"github.com/xpu-cdi/xpu-cdi/internal/nodeinstall"
	"github.com/xpu-cdi/xpu-cdi/internal/partition/sriov"
	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

type options struct {
	hostRoot        string
	devRoot         string
	driverRoot      string
	hookDir         string
	hookSource      string
	output          string
	interval        time.Duration
	once            bool
	uninstallOnExit bool
	strategies      cli.StringSlice
	spec            cdispec.Settings
	kind            cmdflags.Kind
	labelsFile      string
	configFile      string
	kubelet         cmdflags.Kubelet
	partitions      partitionOptions
}

func (o *options) commonFlags() []cli.Flag {
	return append(o.kind.Flags("of the node's spec"),
		&cli.StringFlag{Name: "host-root", Usage: "where the host's / is mounted (`DIR`); every other path is the host's and is reached below it", Value: nodeinstall.DefaultHostRoot, EnvVars: []string{"XPU_CDI_HOST_ROOT"}, Destination: &o.hostRoot},
		&cli.StringFlag{Name: "dev-root", Usage: "where the host's /dev, /proc and /sys are, as the host names it (`DIR`, below --host-root), e.g. a driver container's tree", Value: "/", EnvVars: []string{"XPU_CDI_DEV_ROOT"}, Destination: &o.devRoot},
		&cli.StringFlag{Name: "driver-root", Usage: "where the driver's user-space files are, as the host names it (`DIR`, below --host-root)", Value: "/", EnvVars: []string{"XPU_CDI_DRIVER_ROOT"}, Destination: &o.driverRoot},
		&cli.StringFlag{Name: "hook-dir", Usage: "host `DIR` the static xpu-runtime-hook is installed into (created when missing; not a symlink)", Value: nodeinstall.DefaultHookDir, EnvVars: []string{"XPU_CDI_HOOK_DIR"}, Destination: &o.hookDir},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "the node's CDI spec `FILE` on the host", Value: nodeinstall.DefaultSpecPath, EnvVars: []string{"XPU_CDI_OUTPUT"}, Destination: &o.output},
		&cli.StringFlag{Name: "labels-file", Usage: "keep the node labels in this NFD feature `FILE` on the host (only where its directory exists), e.g. /etc/kubernetes/node-feature-discovery/features.d/xpu-cdi", EnvVars: []string{"XPU_CDI_LABELS_FILE"}, Destination: &o.labelsFile},
	)
}

func (o *options) newInstaller(log *logrus.Logger) (*nodeinstall.Installer, error) {
	if err := o.kind.Validate(); err != nil {
		return nil, err
	}
	o.spec.Vendor, o.spec.Class = o.kind.Vendor, o.kind.Class
	names, err := cdispec.ParseNameStrategies(flagutil.SplitList(o.strategies.Value()))
	if err != nil {
		return nil, fmt.Errorf("--device-name-strategy: %w", err)
	}
	o.spec.NameStrategies = names
	var s *sharing.Config
	if o.configFile != "" {
		c, err := sharing.Load(o.configFile, o.kubelet.ResourceName)
		if err != nil {
			return nil, fmt.Errorf("--config-file: %w", err)
		}
		s = &c
	}
	parts, err := o.partitions.build(o.hostRoot, o.devRoot, o.driverRoot, &o.kubelet, o.configFile, cdispec.Kind(o.kind.Vendor, o.kind.Class), log)
	if err != nil {
		return nil, err
	}
	return nodeinstall.New(nodeinstall.Config{
		Partitions:   parts,
		LabelsFile:   o.labelsFile,
		Sharing:      s,
		ResourceName: o.kubelet.ResourceName,
		HostRoot:     o.hostRoot,
		DevRoot:      o.devRoot,
		DriverRoot:   o.driverRoot,
		HookDir:      o.hookDir,
		HookSource:   o.hookSource,
		SpecPath:     o.output,
		Settings:     o.spec,
		Interval:     o.interval,
		LockSpec:     layoutLock(o.hostRoot),
		Log:          log,
	})
}

// specLockWait bounds the wait for the node's layout lock before a spec
// pass: a cut holds it for seconds; a pass that waits longer leaves the
// spec to the next one (the cutter rewrites it itself).
var specLockWait = 10 * time.Second

// layoutLock takes the node's layout lock below hostRoot (the host's /):
// the spec is read and written while no one cuts a card.
func layoutLock(hostRoot string) func(context.Context) (func(), error) {
	return func(ctx context.Context) (func(), error) {
		l, err := sriov.LockLayout(ctx, hostRoot, specLockWait)
		if err != nil {
			return nil, err
		}
		return l.Unlock, nil
	}
}

// NewCommand returns `xpu-cdi install`.
func NewCommand(log *logrus.Logger) *cli.Command {
	o := &options{}
	return &cli.Command{
		Name:  "install",
		Usage: "Set up a node that has only the Kunlun driver, from a container with the host's / at --host-root",
		Description: `The DaemonSet mode of xpu-cdi (the Helm chart's installer): installs the static xpu-runtime-hook
into --hook-dir on the host, atomically (a container starting meanwhile runs the old hook or the new
one), and writes the node's CDI spec to --output on the host, naming the installed hook by its host
path and every device node and driver file by the path the host sees (not the --host-root path it
was read through). Then it reads the host again every --interval and rewrites the spec when the
host changes (driver reloaded, devices appearing or going). While the driver is not loaded it says
so, keeps no spec, and waits.

On SIGTERM it stops; with --uninstall-on-exit it first removes the spec, the hook and the
directories it created (what "xpu-cdi uninstall" does). With --labels-file it also keeps the
node labels for Node Feature Discovery (as "xpu-cdi labels"), with the sharing labels of
--config-file.

With --partition-layout (or --partition-node-label) it also keeps the cards' SR-IOV partition
layout: before it writes the spec, at its start and whenever the layout asked for changes (or a
card was re-laid-out since), it applies the layout as "xpu-cdi partition apply" does (checked
whole, cards in use refused and tried again every --interval). The node label
node-restriction.kubernetes.io/baidu.com-xpu.partition-layout (label form: all-2,
all-2_0000.3b.00.0-4) of --node-name, read from the API server, overrides --partition-layout on
that node; a node's own kubelet cannot set a label of that prefix. The old label
baidu.com/xpu.partition-layout is still read when the new one is not set, with a warning, for one
more release; the labels file leaves it out, so that NFD does not write over it.
With --partition-config FILE (named layouts, each under a [NAME] line) the label value
name.NAME lays the node out as the file's layout NAME (e.g. name.halves).

  xpu-cdi install --host-root /host --hook-dir /opt/xpu-cdi/bin`,
		Flags: append(append(o.commonFlags(),
			&cli.StringFlag{Name: "hook-source", Usage: "the static hook binary to install (`FILE`, in this container)", Value: nodeinstall.DefaultHookSource, EnvVars: []string{"XPU_CDI_HOOK_SOURCE"}, Destination: &o.hookSource},
			&cli.StringSliceFlag{Name: "device-name-strategy", Usage: "how devices are named: index, bdf, serial (repeatable); default: all three", EnvVars: []string{"XPU_CDI_DEVICE_NAME_STRATEGY"}, Destination: &o.strategies},
			&cli.BoolFlag{Name: "nodes-only", Usage: "leave out the driver libraries (device nodes and xpu-smi only), for images that ship their own XRE", EnvVars: []string{"XPU_CDI_NODES_ONLY"}, Destination: &o.spec.NodesOnly},
			&cli.DurationFlag{Name: "interval", Usage: "how often the host is read again", Value: nodeinstall.DefaultInterval, EnvVars: []string{"XPU_CDI_INTERVAL"}, Destination: &o.interval},
			&cli.BoolFlag{Name: "once", Usage: "install the hook, write the spec once and exit (an error if the driver is not loaded)", EnvVars: []string{"XPU_CDI_ONCE"}, Destination: &o.once},
			&cli.StringFlag{Name: "config-file", Usage: "the device plugin's sharing configuration `FILE`, for the .sharing-strategy and .replicas labels and, with partitions, the in-use check (its renames count as holding a card)", EnvVars: []string{"XPU_CDI_CONFIG_FILE"}, Destination: &o.configFile},
			o.kubelet.ResourceNameFlag("the device plugin's resource, as --config-file names it (with partitions: NAME, NAME-<size> and NAME.shared count as holding a card); the partition-count labels are NAME-<size>.count"),
			&cli.BoolFlag{Name: "uninstall-on-exit", Usage: "on SIGTERM, remove the spec, the hook and the directories install created", EnvVars: []string{"XPU_CDI_UNINSTALL_ON_EXIT"}, Destination: &o.uninstallOnExit},
		), o.partitions.flags(&o.kubelet)...),
		Before: func(c *cli.Context) error {
			if o.interval < 100*time.Millisecond {
				return fmt.Errorf("--interval %s is too short: give at least 100ms (e.g. 10s)", o.interval)
			}
			// The host's kubelet is below --host-root; a socket given by
			// flag or variable must exist, the default one need not (a
			// host without a kubelet: processes only).
			o.partitions.requirePodResources = o.kubelet.PodResourcesSocketSet(c)
			o.kubelet.ApplyHostRoot(c, o.hostRoot)
			return o.partitions.validate()
		},
		Action: func(c *cli.Context) error {
			in, err := o.newInstaller(log)
			if err != nil {
				return err
			}
			defer func() { _ = in.Close() }() // a read-only directory handle
			if o.once {
				return runOnce(in, log)
			}
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			log.Infof("installing the hook into %s and keeping the CDI spec %s (host root %s, every %s)", o.hookDir, o.output, o.hostRoot, o.interval)
			err = in.Run(ctx)
			if o.uninstallOnExit && ctx.Err() != nil {
				err = errors.Join(err, in.Uninstall())
			}
			return err
		},
	}
}

func runOnce(in *nodeinstall.Installer, log *logrus.Logger) error {
	wrote, err := in.InstallHook()
	if err != nil {
		return err
	}
	if wrote {
		log.Infof("installed %s", in.HookPath())
	}
	state, err := in.SyncSpec()
	if err != nil {
		return err
	}
	if state == nodeinstall.SpecWaiting {
		return fmt.Errorf("no usable XPU on this node yet: no CDI spec written to %s", in.SpecPath())
	}
	log.Infof("CDI spec %s %s", in.SpecPath(), state)
	return nil
}

// NewUninstallCommand returns `xpu-cdi uninstall`.
func NewUninstallCommand(log *logrus.Logger) *cli.Command {
	o := &options{}
	return &cli.Command{
		Name:  "uninstall",
		Usage: "Remove what `xpu-cdi install` put on the node",
		Description: `Removes the CDI spec --output (only a spec of the --vendor/--class kind), the hook in --hook-dir
and the directories install created, when they are empty. Give the flags install was given.`,
		Flags: o.commonFlags(),
		Action: func(*cli.Context) error {
			in, err := o.newInstaller(log)
			if err != nil {
				return err
			}
			defer func() { _ = in.Close() }() // a read-only directory handle
			return in.Uninstall()
		},
	}
}
