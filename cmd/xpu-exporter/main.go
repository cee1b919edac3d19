// Command xpu-exporter exports the node's Kunlun XPUs to Prometheus: per
// device facts, memory, utilisation, temperature, power, health and resets,
// attributed to the pods holding them through the kubelet's PodResources.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	promversion "github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"
	"golang.org/x/net/netutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
	"github.com/xpu-cdi/xpu-cdi/internal/daemon"
	"github.com/xpu-cdi/xpu-cdi/internal/exporter"
	"github.com/xpu-cdi/xpu-cdi/internal/exporter/xpusmi"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
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
		fmt.Fprintf(os.Stderr, "xpu-exporter: %v\n", err)
		os.Exit(1)
	}
}

// DefaultListenAddress is the vendor exporter's port.
const DefaultListenAddress = ":9507"

// xpuSMIOff is the --xpu-smi value that turns the source off.
const xpuSMIOff = "none"

type options struct {
	host          cmdflags.Host
	level         cmdflags.LogLevel
	kind          cmdflags.Kind
	specDirs      cmdflags.SpecDirs
	listen        cli.StringSlice
	telemetryPath string
	webConfig     string
	kubelet       cmdflags.Kubelet
	configFile    string
	pods          podresources.Config
	self          types.NamespacedName
	xpuSMI        string
	xpuSMITimeout time.Duration
	xpuSMIChroot  bool
	maxPods       int
	minInterval   time.Duration
	wait          time.Duration
	stuckAfter    time.Duration
	maxConns      int
	// timeouts of the HTTP server (zero: serverTimeouts' defaults; tests
	// shorten them).
	timeouts serverTimeouts
}

// serverTimeouts bound how long a connection may take over each part of
// its life.
type serverTimeouts struct {
	readHeader, read, write, idle time.Duration
}

// Defaults of the server's bounds.
const (
	DefaultMaxConnections = 32
	// DefaultMinCollectionInterval: scrapes within it of a collection
	// share it.
	DefaultMinCollectionInterval = 5 * time.Second
	// maxHeaderBytes bounds a request's header (a basic auth header fits).
	maxHeaderBytes = 16 << 10
)

// withDefaults fills the zero timeouts: a client has 10 s to send its
// header and 30 s its request, a scrape 1 min to be answered (the
// collection wait and the writing), an idle keep-alive connection is
// closed after 1 min (Prometheus scrapes every 30 s by default, and keeps
// its connection).
func (t serverTimeouts) withDefaults() serverTimeouts {
	def := serverTimeouts{readHeader: 10 * time.Second, read: 30 * time.Second, write: time.Minute, idle: time.Minute}
	if t.readHeader == 0 {
		t.readHeader = def.readHeader
	}
	if t.read == 0 {
		t.read = def.read
	}
	if t.write == 0 {
		t.write = def.write
	}
	if t.idle == 0 {
		t.idle = def.idle
	}
	return t
}

const description = `Serves Prometheus metrics of the node's Kunlun XPUs (the devices the node offers, found as
xpu-cdi finds them: one per /dev/xpuN that can run work, VFs of a partitioned card included):
  xpu_info{family,serial,driver_version,xre_version} 1, xpu_memory_used_bytes,
  xpu_memory_total_bytes, xpu_utilization_ratio, xpu_temperature_celsius, xpu_power_watts,
  xpu_healthy (the device plugin's and the DRA driver's judgement) with xpu_health_info{reason},
  xpu_resets_total (driver 4.x), xpu_unlisted_holder_pods, xpu_exporter_collect_duration_seconds,
  xpu_exporter_source_up{source}, xpu_exporter_collection_stale and
  xpu_exporter_collection_age_seconds, xpu_exporter_build_info{version,revision,goversion,...}.
Every device series carries xpu (the N of /dev/xpuN), pci_bus_id and model, and a VF's
parent_pci_bus_id. Each collection reads the host again (see below for which scrapes collect).

Telemetry comes from the host's xpu-smi (-m, and -i N -q for the PCI address of an xpu-smi
index), run by absolute path without a shell, bounded by --xpu-smi-timeout and 1 MiB of
output; with --host-root it runs inside a chroot into the host root (it is a glibc program of
the host's XRE). A host without xpu-smi exports what discovery knows, with
xpu_exporter_source_up{source="xpu-smi"} 0.

Per-pod attribution: PodResources List on --pod-resources-socket at each collection adds
exported_namespace, exported_pod and exported_container (and claim, claim_namespace for DRA
claims of --dra-driver-name) to the series of each XPU a pod holds, once per pod (its
containers folded: exported_container when one container holds it), at most
--max-pods-per-xpu pods per XPU, the others counted in xpu_unlisted_holder_pods; empty turns it
off; the pod --self-pod-namespace/--self-pod-name (the exporter's own, given every XPU by an
admin-access claim) holds none. The holder labels are not pod/namespace/container, which Prometheus' Kubernetes discovery
gives every series as the exporter pod's own.

Scrapes share collections: a scrape within --min-collection-interval of the last collection is
served it; concurrent scrapes share one; a scrape waits for a collection at most
--collection-wait, then gets the last one with xpu_exporter_collection_stale 1. GET /healthz
fails (503) while a collection has run longer than --collection-stuck-after.

Connections: at most --web.max-connections per listen address (the others wait in the
kernel's backlog), headers in 10 s, requests in 30 s, answers in 1 min, idle ones closed after
1 min.

TLS and basic auth: --web.config.file, the exporter toolkit's web configuration file.`

func newApp(log *logrus.Logger) *cli.App {
	return newAppWith(log, &options{})
}

// newAppWith is newApp with o's fields that are no flags (the server's
// timeouts) set by the caller.
func newAppWith(log *logrus.Logger, o *options) *cli.App {
	return &cli.App{
		Name:        "xpu-exporter",
		Usage:       "Prometheus exporter of Kunlun XPU metrics, per device and per pod",
		Version:     fmt.Sprintf("%s (commit %s)", version, commit),
		Description: description,
		Flags:       append(append(append(o.host.Flags(), o.host.HostRootFlag()), o.kind.Flags("whose specs must name a device for it to count as healthy")...), o.flags()...),
		Before: func(c *cli.Context) error {
			if err := o.level.Apply(log); err != nil {
				return err
			}
			return o.validate(c)
		},
		Action: func(c *cli.Context) error {
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return o.serve(ctx, log)
		},
		HideHelpCommand: true,
	}
}

func (o *options) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "web.listen-address", Usage: "`ADDRESS` to serve metrics on (repeatable)", Value: cli.NewStringSlice(DefaultListenAddress), EnvVars: []string{"XPU_CDI_EXPORTER_LISTEN_ADDRESS"}, Destination: &o.listen},
		&cli.StringFlag{Name: "web.telemetry-path", Usage: "`PATH` of the metrics", Value: "/metrics", EnvVars: []string{"XPU_CDI_EXPORTER_TELEMETRY_PATH"}, Destination: &o.telemetryPath},
		&cli.StringFlag{Name: "web.config.file", Usage: "the exporter toolkit's web configuration `FILE` (TLS, basic auth)", EnvVars: []string{"XPU_CDI_EXPORTER_WEB_CONFIG_FILE"}, Destination: &o.webConfig},
		o.kubelet.PodResourcesSocketFlag("the kubelet's PodResources `SOCKET`, asked at each collection which pods hold which XPU; with --host-root, the default is below it; empty turns attribution off"),
		o.kubelet.ResourceNameFlag("the device plugin's resource `NAME`; NAME.shared (time-slicing renamed) and NAME-<size> (partitions) count too"),
		&cli.StringFlag{Name: "config-file", Usage: "the device plugin's sharing configuration `FILE` (its --config-file): the names it renames resources to (rename: example.com/xpu-ts) are attributed too", EnvVars: []string{"XPU_CDI_CONFIG_FILE"}, Destination: &o.configFile},
		o.kubelet.DRADriverNameFlag("the DRA driver whose claims are attributed"),
		&cli.StringFlag{Name: "xpu-smi", Usage: "absolute `PATH` of xpu-smi as the host sees it (inside --host-root); default: the one discovery finds (/usr/local/bin/xpu-smi ...); \"none\" turns the source off", EnvVars: []string{"XPU_CDI_XPU_SMI"}, Destination: &o.xpuSMI},
		&cli.DurationFlag{Name: "xpu-smi-timeout", Usage: "how long one run of xpu-smi may take before it is killed", Value: xpusmi.DefaultTimeout, EnvVars: []string{"XPU_CDI_XPU_SMI_TIMEOUT"}, Destination: &o.xpuSMITimeout},
		&cli.StringFlag{Name: "self-pod-namespace", Usage: "with --self-pod-name: the `NAMESPACE` of the exporter's own pod, which holds no XPU whatever the kubelet says (its admin-access claim names them all)", EnvVars: []string{"XPU_CDI_EXPORTER_POD_NAMESPACE"}, Destination: &o.self.Namespace},
		&cli.StringFlag{Name: "self-pod-name", Usage: "the `NAME` of the exporter's own pod (see --self-pod-namespace); empty: none", EnvVars: []string{"XPU_CDI_EXPORTER_POD_NAME"}, Destination: &o.self.Name},
		&cli.IntFlag{Name: "max-pods-per-xpu", Usage: "at most `N` pods with series of their own per XPU; the others are counted in xpu_unlisted_holder_pods", Value: exporter.DefaultMaxPodsPerXPU, EnvVars: []string{"XPU_CDI_EXPORTER_MAX_PODS_PER_XPU"}, Destination: &o.maxPods},
		&cli.DurationFlag{Name: "min-collection-interval", Usage: "scrapes within this `DURATION` of the last collection's start are served it, so xpu-smi runs at most once per DURATION whoever scrapes; 0 collects at each scrape", Value: DefaultMinCollectionInterval, EnvVars: []string{"XPU_CDI_EXPORTER_MIN_COLLECTION_INTERVAL"}, Destination: &o.minInterval},
		&cli.DurationFlag{Name: "collection-wait", Usage: "how long a scrape waits for the collection in progress before it gets the last one, marked stale", Value: exporter.DefaultCollectionWait, EnvVars: []string{"XPU_CDI_EXPORTER_COLLECTION_WAIT"}, Destination: &o.wait},
		&cli.DurationFlag{Name: "collection-stuck-after", Usage: "GET /healthz fails while a collection has run longer than this", Value: exporter.DefaultStuckAfter, EnvVars: []string{"XPU_CDI_EXPORTER_COLLECTION_STUCK_AFTER"}, Destination: &o.stuckAfter},
		&cli.IntFlag{Name: "web.max-connections", Usage: "at most `N` open connections per listen address; the others wait in the kernel's backlog", Value: DefaultMaxConnections, EnvVars: []string{"XPU_CDI_EXPORTER_MAX_CONNECTIONS"}, Destination: &o.maxConns},
		&cli.BoolFlag{Name: "xpu-smi-chroot", Usage: "with --host-root, run xpu-smi inside a chroot into the host root (needs CAP_SYS_CHROOT); false runs it directly", Value: true, EnvVars: []string{"XPU_CDI_XPU_SMI_CHROOT"}, Destination: &o.xpuSMIChroot},
		o.specDirs.Flag("cdi-spec-dir", "CDI spec directory read for the health judgement"),
		o.level.Flag(),
	}
}

func (o *options) validate(c *cli.Context) error {
	if err := o.host.ApplyHostRoot(c); err != nil {
		return err
	}
	o.kubelet.ApplyHostRoot(c, o.host.HostRoot)
	if err := o.kind.Validate(); err != nil {
		return err
	}
	if !strings.HasPrefix(o.telemetryPath, "/") || path.Clean(o.telemetryPath) != o.telemetryPath {
		return fmt.Errorf("--web.telemetry-path %q: give an absolute, clean URL path such as /metrics", o.telemetryPath)
	}
	if len(o.listen.Value()) == 0 {
		return errors.New("--web.listen-address is empty: give an address such as " + DefaultListenAddress)
	}
	if o.xpuSMI != "" && o.xpuSMI != xpuSMIOff && (!path.IsAbs(o.xpuSMI) || path.Clean(o.xpuSMI) != o.xpuSMI) {
		return fmt.Errorf("--xpu-smi %q: give an absolute, clean path (or %q)", o.xpuSMI, xpuSMIOff)
	}
	if o.xpuSMITimeout < 10*time.Millisecond {
		return fmt.Errorf("--xpu-smi-timeout %s is too short: give at least 10ms (e.g. 5s)", o.xpuSMITimeout)
	}
	if o.maxPods < 1 {
		return fmt.Errorf("--max-pods-per-xpu %d: give at least 1", o.maxPods)
	}
	if o.maxConns < 1 {
		return fmt.Errorf("--web.max-connections %d: give at least 1", o.maxConns)
	}
	if o.minInterval < 0 {
		return fmt.Errorf("--min-collection-interval %s is negative: give 0 or more (e.g. 5s)", o.minInterval)
	}
	if o.wait < 10*time.Millisecond {
		return fmt.Errorf("--collection-wait %s is too short: give at least 10ms (e.g. 5s)", o.wait)
	}
	// A collection runs xpu-smi -m, and -q for up to one more timeout and
	// one run, and asks the kubelet for up to its timeout.
	if least := 3*o.xpuSMITimeout + podresources.DefaultTimeout; o.stuckAfter < least {
		return fmt.Errorf("--collection-stuck-after %s is shorter than a working collection may take: give at least %s (3 x --xpu-smi-timeout %s, and %s for the kubelet)",
			o.stuckAfter, least, o.xpuSMITimeout, podresources.DefaultTimeout)
	}
	pods, err := podresources.Config{ResourcePrefix: o.kubelet.ResourceName, DRADriver: o.kubelet.DRADriverName}.WithSharingFile(o.configFile)
	if err != nil {
		return fmt.Errorf("--config-file: %w", err)
	}
	if (o.self.Name == "") != (o.self.Namespace == "") {
		return fmt.Errorf("--self-pod-name %q and --self-pod-namespace %q: give both or neither", o.self.Name, o.self.Namespace)
	}
	pods.Self = o.self
	o.pods = pods
	if o.webConfig != "" {
		if err := web.Validate(o.webConfig); err != nil {
			return fmt.Errorf("--web.config.file %s: %w", o.webConfig, err)
		}
	}
	return nil
}

// collector builds the collector the flags describe.
func (o *options) collector(log *logrus.Logger) (*exporter.Collector, *podresources.Client) {
	cfg := exporter.Config{
		Log:      log,
		Kind:     o.kind.String(),
		SpecDirs: o.specDirs.Dirs(),
		Discover: func() (*discover.Host, error) { return o.host.Discover(nil) },
		DevRoot:  o.host.DevRoot,
		NoXPUSMI: o.xpuSMI == xpuSMIOff,
		XPUSMI:   xpusmi.Config{Timeout: o.xpuSMITimeout},

		MaxPodsPerXPU: o.maxPods,
		MinInterval:   o.minInterval,
		Wait:          o.wait,
		StuckAfter:    o.stuckAfter,
	}
	if !cfg.NoXPUSMI {
		if o.host.HostRoot != "" && o.xpuSMIChroot {
			cfg.XPUSMIChroot = o.host.HostRoot
		}
		if o.xpuSMI != "" {
			// As the host sees it: below the host root, where the
			// exporter reads the host.
			cfg.XPUSMIPath = path.Join(o.host.DriverRoot, o.xpuSMI)
		}
	}
	if o.kubelet.PodResourcesSocket != "" {
		cfg.Pods = podresources.New(o.kubelet.PodResourcesSocket, o.pods)
	}
	return exporter.New(cfg), cfg.Pods
}

// stampVersion hands the linker's version and commit to
// prometheus/common/version, which the build-info collector reads.
var stampVersion = sync.OnceFunc(func() {
	promversion.Version, promversion.Revision = version, commit
})

// buildInfo returns the collector of xpu_exporter_build_info{version,
// revision,branch,goversion,goos,goarch,tags} 1, as the exporters built on
// the exporter toolkit serve it.
func buildInfo() prometheus.Collector {
	stampVersion()
	return versioncollector.NewCollector("xpu_exporter")
}

// healthPath is the liveness endpoint.
const healthPath = "/healthz"

// handler serves the metrics of c (and the process's own) at the
// telemetry path, c's liveness at /healthz, and a landing page at / when
// the path is another.
func (o *options) handler(c *exporter.Collector) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(buildInfo()); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+healthPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := c.Healthy(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "unhealthy: %v\n", err)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.Handle(o.telemetryPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{MaxRequestsInFlight: 4, Timeout: time.Minute}))
	if o.telemetryPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name: "xpu-exporter", Description: "Prometheus exporter of Kunlun XPUs", Version: version,
			Links: []web.LandingLinks{{Address: o.telemetryPath, Text: "Metrics"}, {Address: healthPath, Text: "Health"}},
		})
		if err != nil {
			return nil, err
		}
		mux.Handle("/", landing)
	}
	return mux, nil
}

func (o *options) serve(ctx context.Context, log *logrus.Logger) error {
	c, pods := o.collector(log)
	if pods != nil {
		defer func() { _ = pods.Close() }()
	}
	h, err := o.handler(c)
	if err != nil {
		return err
	}
	t := o.timeouts.withDefaults()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.readHeader,
		ReadTimeout:       t.read,
		WriteTimeout:      t.write,
		IdleTimeout:       t.idle,
		MaxHeaderBytes:    maxHeaderBytes,
		// The server's own errors (a failed TLS handshake) in the
		// exporter's log format.
		ErrorLog: daemon.StdLog(log, logrus.WarnLevel),
	}
	listen := o.listen.Value()
	listeners := make([]net.Listener, 0, len(listen))
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for _, addr := range listen {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("--web.listen-address %s: %w", addr, err)
		}
		// The semaphore bounds the connections the server holds (each
		// costs memory); the kernel's backlog holds the others.
		listeners = append(listeners, netutil.LimitListener(l, o.maxConns))
	}
	systemd := false
	flags := &web.FlagConfig{WebListenAddresses: &listen, WebSystemdSocket: &systemd, WebConfigFile: &o.webConfig}
	log.Infof("xpu-exporter %s: metrics on %s%s (at most %d connections each), dev root %s, driver root %s, pod resources %q",
		version, strings.Join(listen, ","), o.telemetryPath, o.maxConns, o.host.DevRoot, o.host.DriverRoot, o.kubelet.PodResourcesSocket)
	errc := make(chan error, 1)
	go func() {
		errc <- web.ServeMultiple(listeners, srv, flags, daemon.Slog(log))
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			return err
		}
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
