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
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags/kubeclient"
	"github.com/xpu-cdi/xpu-cdi/internal/daemon"
	"github.com/xpu-cdi/xpu-cdi/internal/dra"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/partition/sriov"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
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
	kubelet       cmdflags.Kubelet
	nodeName      string
	pluginDataDir string
	registryDir   string
	podUID        string
	// partitions and idleLayout are --partitions and --idle-layout as
	// given; mode and idleWhole what validate read from them.
	partitions string
	idleLayout string
	mode       dra.PartitionMode
	idleWhole  bool
}

// The values of --idle-layout.
const (
	idleKeep  = "keep"
	idleWhole = "whole"
)

const description = `Publishes the node's Kunlun XPUs (found as xpu-cdi finds them: one device per /dev/xpuN
that can run work, named xpu-N) in the node's ResourceSlice of driver --dra-driver-name, with
attributes for what the host tells (index, model, family, PCI bus ID and PCIe root, NUMA node,
SR-IOV role, serial, driver and XRE versions) and the memory capacity, and publishes it again
when the host changes. A device that cannot run work (an error state in /proc/xpu/devN/state, no
/dev/xpuctrl, no CDI spec naming it) is tainted NoSchedule with the key <dra-driver-name>/unhealthy.

Prepare answers the CDI names of the node's spec (baidu.com/xpu=N), which containerd 2.x and
CRI-O resolve; the spec must exist:
  xpu-cdi generate --output /etc/cdi/baidu.com-xpu.yaml
(the xpu-cdi package's xpu-cdi-refresh service re-creates it at boot). Pods that share one
claim share its XPUs by time-slicing, without memory or fault isolation.

It waits for the kubelet's plugin registry, records prepared claims in --plugin-data-dir, and
publishes an empty slice on a node without XPU instead of exiting. With --pod-uid (POD_UID) the
old and the new driver of a rolling update answer side by side, sharing those records.

With --partitions=dynamic it offers, instead of the devices the SR-IOV cards have now, every
way each card can be cut: a counter set per card holding its memory, the whole card (xpu-N, N
its place in PCI address order) and each VF slot of each count the board allows (xpu-N-h0..h1,
xpu-N-q0..q3), each in the compatibility group of its count. A card is laid out at Prepare when
no claim of this driver holds it and no process or pod (--pod-resources-socket) does, under the
node lock of "xpu-cdi partition apply"; the node spec's devices are then rewritten. Unprepare
frees the slot; --idle-layout=whole returns a card no claim holds any more to whole (default
keep). At start it checks that the API server keeps the counters and groups, and exits naming
the feature gates (DRADeviceCompatibilityGroups) of kube-apiserver and kube-scheduler when not.

  xpu-dra-driver print-slice --dev-root R --driver-root R [--node-name N] [--partitions dynamic]
prints the ResourceSlice(s) it would publish for a host, without a cluster.`

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
			UsageText: "xpu-dra-driver print-slice [--dev-root R] [--driver-root R] [--node-name N] [--partitions static|dynamic]",
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
		// --driver-name was this flag's name before every command that
		// names the driver took --dra-driver-name.
		o.kubelet.DRADriverNameFlag("DRA driver name: the ResourceSlice's driver and the domain of the attributes", "driver-name"),
		&cli.StringFlag{Name: "node-name", Usage: "the node (and pool) the slice is published for; print-slice defaults to the host name", EnvVars: []string{"NODE_NAME", "XPU_CDI_NODE_NAME"}, Destination: &o.nodeName},
		o.specDirs.Flag("cdi-spec-dir", "CDI spec directory checked for the node spec (and, with --partitions=dynamic, the one whose node spec is rewritten after a card is laid out again)"),
		&cli.StringFlag{Name: "partitions", Usage: "how SR-IOV partitions are offered, `MODE` static (the devices the cards' layouts have now, as xpu-cdi partition apply made them) or dynamic (every way each SR-IOV card can be cut, with shared counters and compatibility groups; a card is laid out at Prepare; needs the DRADeviceCompatibilityGroups gate of kube-apiserver and kube-scheduler)", Value: dra.PartitionsStatic.String(), EnvVars: []string{"XPU_CDI_PARTITIONS"}, Destination: &o.partitions},
		o.level.Flag(),
	)
}

func (o *options) serveFlags() []cli.Flag {
	return []cli.Flag{
		o.kubelet.PollIntervalFlag(),
		o.kube.Flag(),
		&cli.StringFlag{Name: "plugin-data-dir", Usage: "the plugin's `DIR` (its DRA socket and the records of prepared claims); default: /var/lib/kubelet/plugins/<dra-driver-name>", EnvVars: []string{"XPU_CDI_PLUGIN_DATA_DIR"}, Destination: &o.pluginDataDir},
		&cli.StringFlag{Name: "plugin-registry-dir", Usage: "the kubelet's plugin registration `DIR`", Value: kubeletplugin.KubeletRegistryDir, EnvVars: []string{"XPU_CDI_PLUGIN_REGISTRY_DIR"}, Destination: &o.registryDir},
		&cli.StringFlag{Name: "pod-uid", Usage: "the `UID` of the driver's pod (downward API metadata.uid): registers sockets of its own, so that during a DaemonSet's rolling update (maxSurge) the old and the new driver answer side by side (kubelet 1.33+); empty: one driver per node", EnvVars: []string{"POD_UID", "XPU_CDI_POD_UID"}, Destination: &o.podUID},
		o.kubelet.HealthAddressFlag(cmdflags.DRADriverHealthAddress),
		&cli.StringFlag{Name: "idle-layout", Usage: "with --partitions=dynamic, what becomes of a card whose last claim is unprepared, `POLICY` keep (its VFs stay, for the next claim of their size) or whole (laid out whole again); static mode lays out no card and refuses whole", Value: idleKeep, EnvVars: []string{"XPU_CDI_IDLE_LAYOUT"}, Destination: &o.idleLayout},
		o.kubelet.PodResourcesSocketFlag("with --partitions=dynamic, the kubelet's PodResources `SOCKET`, asked which pods hold a card before it is laid out again (as xpu-cdi partition apply asks it); a socket that does not exist is an error then; \"\": processes only"),
	}
}

// setLevel applies --log-level to log and to klog, through which client-go
// and the helper library log.
func (o *options) setLevel(log *logrus.Logger) error {
	if err := o.level.Apply(log); err != nil {
		return err
	}
	o.kubelet.WarnDeprecated(log)
	return daemon.RouteKlog(log)
}

func (o *options) validate(serve bool) error {
	if err := o.kind.Validate(); err != nil {
		return err
	}
	mode, err := dra.ParsePartitionMode(o.partitions)
	if err != nil {
		return fmt.Errorf("--partitions (XPU_CDI_PARTITIONS): %w", err)
	}
	o.mode = mode
	if err := dra.ValidateDriverName(o.kubelet.DRADriverName); err != nil {
		return fmt.Errorf("--dra-driver-name: %w", err)
	}
	if o.nodeName == "" {
		return errors.New("--node-name (or NODE_NAME) is empty: give the node's name, in a DaemonSet from the downward API (fieldRef spec.nodeName)")
	}
	if !serve {
		return nil
	}
	if err := o.kubelet.ValidatePollInterval(); err != nil {
		return err
	}
	switch o.idleLayout {
	case idleKeep:
	case idleWhole:
		if o.mode != dra.PartitionsDynamic {
			return fmt.Errorf("--idle-layout (XPU_CDI_IDLE_LAYOUT) %s needs --partitions=dynamic: with --partitions=%s the driver lays out no card", idleWhole, o.mode)
		}
		o.idleWhole = true
	default:
		return fmt.Errorf("--idle-layout (XPU_CDI_IDLE_LAYOUT) %q: give %s or %s", o.idleLayout, idleKeep, idleWhole)
	}
	if o.pluginDataDir == "" {
		o.pluginDataDir = filepath.Join(kubeletplugin.KubeletPluginsDir, o.kubelet.DRADriverName)
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
		DriverName: o.kubelet.DRADriverName,
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
		Withheld:   func() ([]string, error) { return partition.LayingOut(o.host.DevRoot) },
		Partitions: o.mode,
		IdleWhole:  o.idleWhole,
	}
}

// layout is the SR-IOV writer of dynamic mode, configured as `xpu-cdi
// partition apply` configures it: the dev root stands for the host's /
// (it has the sysfs written and the node's layout lock), the in-use check
// asks the PodResources socket (a missing one is an error: the driver
// runs beside a kubelet) about this driver's claims and the device
// plugin's resources, and once a card changed the node's CDI spec names
// its new functions.
func (o *options) layout(log *logrus.Logger) *sriov.Config {
	kind, dirs, devRoot := o.kind.String(), o.specDirs.Dirs(), o.host.DevRoot
	return &sriov.Config{
		Config: partition.Config{
			DevRoot: o.host.DevRoot, DriverRoot: o.host.DriverRoot,
			PodResourcesSocket:  o.kubelet.PodResourcesSocket,
			RequirePodResources: o.kubelet.PodResourcesSocket != "",
			PodResources:        podresources.Config{DRADriver: o.kubelet.DRADriverName, CDIKind: kind},
			// Its own claims' devices are cards and slots (xpu-3-q2).
			DRADynamicNames: true,
			Log:             log,
		},
		Progress: func(line string) { log.Info(line) },
		AfterApply: func(h *discover.Host) error {
			wrote, err := xpunode.RefreshSpecDevices(kind, dirs, devRoot, h)
			if len(wrote) > 0 {
				log.Infof("rewrote the devices of the node's CDI spec %s", strings.Join(wrote, ", "))
			}
			return err
		},
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

// checkGates is dynamic mode's check before anything is published: an
// API server or a scheduler without the gates would drop or ignore what
// dynamic mode offers. A *dra.GateError names the gates.
func checkGates(ctx context.Context, d *dra.Driver, client kubernetes.Interface) error {
	err := d.CheckDynamicGates(ctx, client)
	var gate *dra.GateError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &gate):
		return fmt.Errorf("--partitions=dynamic refused: %w", err)
	}
	return fmt.Errorf("--partitions=dynamic: checking that the API server keeps the shared counters and compatibility groups of dynamic partitions: %w", err)
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
	cfg.PollInterval = o.kubelet.PollInterval
	reg := daemon.NewRegistry(dra.MetricsNamespace, version, commit)
	cfg.Metrics = reg
	// The sweep of claims deleted while the driver was down reads them.
	cfg.KubeClient = client
	if o.mode == dra.PartitionsDynamic {
		cfg.Layout = o.layout(log)
	}
	d, err := dra.New(cfg)
	if err != nil {
		return err
	}
	if o.mode == dra.PartitionsDynamic {
		if err := checkGates(ctx, d, client); err != nil {
			return err
		}
		log.Infof("the API server keeps the shared counters and compatibility groups of dynamic partitions")
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
	if err := daemon.StartHealth(ctx, o.kubelet.HealthAddress, ready, log, daemon.WithMetrics(reg)); err != nil {
		return fmt.Errorf("--%s (XPU_CDI_HEALTH_ADDRESS): %w", cmdflags.HealthAddress, err)
	}
	if err := waitForDir(ctx, o.registryDir, log); err != nil {
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	helper, err := kubeletplugin.Start(ctx, d, append([]kubeletplugin.Option{
		kubeletplugin.DriverName(o.kubelet.DRADriverName),
		kubeletplugin.NodeName(o.nodeName),
		kubeletplugin.KubeClient(d.ObservedClient(client)),
		kubeletplugin.PluginDataDirectoryPath(o.pluginDataDir),
		kubeletplugin.RegistrarDirectoryPath(o.registryDir),
		kubeletplugin.RollingUpdate(types.UID(o.podUID)),
	}, dra.SocketOptions()...)...)
	if err != nil {
		return fmt.Errorf("starting the kubelet plugin %s: %w", o.kubelet.DRADriverName, err)
	}
	defer helper.Stop()
	helperOf.Store(helper)
	rolling := "off (no --pod-uid)"
	if o.podUID != "" {
		rolling = "on, pod " + o.podUID
	}
	partitions := o.mode.String()
	if o.mode == dra.PartitionsDynamic {
		partitions += ", idle layout " + o.idleLayout
	}
	log.Infof("xpu-dra-driver %s: driver %s, node %s, CDI kind %s, plugin dir %s, dev root %s, rolling updates %s, partitions %s",
		version, o.kubelet.DRADriverName, o.nodeName, o.kind.String(), o.pluginDataDir, o.host.DevRoot, rolling, partitions)
	return d.Run(ctx, helper)
}
