package deviceplugin

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"

	"github.com/xpu-cdi/xpu-cdi/internal/daemon"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
)

// MetricsNamespace prefixes the plugin's metric names.
const MetricsNamespace = "xpu_device_plugin"

// Causes an Allocate fails with (errors.Is on its error): the cause label
// of xpu_device_plugin_allocation_errors_total is one of these names, so
// the series stay few whatever the kubelet asks.
var (
	ErrReplicasPerContainer = errors.New("more than one replica of a shared XPU for one container")
	ErrDuplicateDevice      = errors.New("a device requested twice for one container")
	ErrUnknownDevice        = errors.New("not a device the resource advertises")
	ErrDeviceUnhealthy      = errors.New("the device is Unhealthy")
)

// allocCauses are the cause label's values, in the order they are checked;
// any other error is "internal".
var allocCauses = []struct {
	err  error
	name string
}{
	{ErrReplicasPerContainer, "replicas_per_container"},
	{ErrDuplicateDevice, "duplicate_device"},
	{ErrUnknownDevice, "unknown_device"},
	{ErrDeviceUnhealthy, "unhealthy_device"},
}

const causeInternal = "internal"

// allocCause is the cause label of an Allocate error.
func allocCause(err error) string {
	for _, c := range allocCauses {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return causeInternal
}

// allocError is an Allocate error: the gRPC status the kubelet gets (with
// the message it shows in the pod's events) and the cause it is counted
// under.
type allocError struct {
	st    *status.Status
	cause error
}

func (e *allocError) Error() string              { return e.st.Err().Error() }
func (e *allocError) GRPCStatus() *status.Status { return e.st }
func (e *allocError) Unwrap() error              { return e.cause }

// metrics are the plugin's Prometheus metrics. Their labels are bounded:
// resource is an advertised resource name (the configured name, its
// partition sizes and sharing's renames), cause one of allocCauses or
// internal, health Healthy or Unhealthy.
type metrics struct {
	allocations   *prometheus.CounterVec
	allocated     *prometheus.CounterVec
	allocErrors   *prometheus.CounterVec
	allocDuration *prometheus.HistogramVec
	registrations *prometheus.CounterVec
	*xpunode.ScanMetrics
}

// newMetrics creates the metrics and registers them with reg (none when
// reg is nil).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		allocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Name: "allocations_total",
			Help: "Allocate calls of the kubelet the plugin answered with devices, by resource.",
		}, []string{"resource"}),
		allocated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Name: "allocated_devices_total",
			Help: "Device IDs handed to containers by Allocate, by resource.",
		}, []string{"resource"}),
		allocErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Name: "allocation_errors_total",
			Help: "Allocate calls the plugin refused, by resource and cause (replicas_per_container, duplicate_device, unknown_device, unhealthy_device, internal).",
		}, []string{"resource", "cause"}),
		allocDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: MetricsNamespace, Name: "allocate_duration_seconds",
			Help:    "Time to answer an Allocate call (refused ones too), by resource.",
			Buckets: xpunode.LatencyBuckets,
		}, []string{"resource"}),
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Name: "registrations_total",
			Help: "Registrations with the kubelet (at start, after a kubelet restart, and for a partition size that appeared), by resource.",
		}, []string{"resource"}),
		ScanMetrics: xpunode.NewScanMetrics(MetricsNamespace, "plugin", "advertises, and registers, what the node has"),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range append([]prometheus.Collector{m.allocations, m.allocated, m.allocErrors, m.allocDuration, m.registrations}, m.Collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the device plugin's metrics: %w", err)
		}
	}
	return m, nil
}

// observeAllocate counts an Allocate call of resource that took since
// start, handed out devices IDs, and failed with err (nil when it did not).
func (m *metrics) observeAllocate(resource string, start time.Time, devices int, err error) {
	m.allocDuration.WithLabelValues(resource).Observe(time.Since(start).Seconds())
	if err != nil {
		m.allocErrors.WithLabelValues(resource, allocCause(err)).Inc()
		return
	}
	m.allocations.WithLabelValues(resource).Inc()
	m.allocated.WithLabelValues(resource).Add(float64(devices))
}

// MetricNames lists the names of the series the plugin exports (a
// histogram's _bucket, _sum and _count; the build-info gauge too), sorted:
// what the chart's dashboard may query.
func MetricNames() []string {
	reg := prometheus.NewRegistry()
	m, _ := newMetrics(reg)
	m.observeAllocate("r", time.Now(), 1, nil)
	m.observeAllocate("r", time.Now(), 0, ErrUnknownDevice)
	m.registrations.WithLabelValues("r")
	return daemon.MetricNames(reg, MetricsNamespace)
}
