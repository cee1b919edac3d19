package dra

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/xpu-cdi/xpu-cdi/internal/daemon"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
)

// MetricsNamespace prefixes the driver's metric names.
const MetricsNamespace = "xpu_dra_driver"

// The operations of the kubelet the driver counts and times.
const (
	opPrepare   = "prepare"
	opUnprepare = "unprepare"
)

// claimCauses are the cause label's values of a claim that failed, from
// its error (errors.Is), in the order they are checked; any other error
// (the state directory could not record the claim) is "internal".
var claimCauses = []struct {
	err  error
	name string
}{
	{ErrClaimNotAllocated, "not_allocated"},
	{ErrUnknownConfig, "unknown_config"},
	{ErrNotOnNode, "not_on_node"},
	{ErrNoSpec, "no_spec"},
	{ErrDeviceUnhealthy, "unhealthy_device"},
	{ErrDeviceInUse, "device_in_use"},
}

// claimCause is the cause label of a claim's error.
func claimCause(err error) string {
	for _, c := range claimCauses {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "internal"
}

// refusalCause is the cause label of a ResourceSlice write the API server
// refused: a fixed set from the API's status reasons.
func refusalCause(err error) string {
	switch {
	case apierrors.IsInvalid(err):
		return "invalid"
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return "forbidden"
	case apierrors.IsConflict(err):
		return "conflict"
	case apierrors.IsAlreadyExists(err):
		return "already_exists"
	case apierrors.IsNotFound(err):
		return "not_found"
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err), apierrors.IsServiceUnavailable(err):
		return "unavailable"
	default:
		return "other"
	}
}

// metrics are the driver's Prometheus metrics. Their labels are bounded:
// operation is prepare or unprepare (create, update or delete for slice
// writes), cause one of a fixed set, health Healthy or Unhealthy. No claim,
// pod, node or device name is a label.
type metrics struct {
	claims        *prometheus.CounterVec
	claimErrors   *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	sliceWrites   *prometheus.CounterVec
	sliceRefusals *prometheus.CounterVec
	publishes     prometheus.Counter
	swept         *prometheus.CounterVec
	*xpunode.ScanMetrics
}

// newMetrics creates the metrics and registers them with reg (none when
// reg is nil).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Name: "claims_total",
			Help: "ResourceClaims the driver prepared or unprepared for the kubelet, by operation (prepare, unprepare).",
		}, []string{"operation"}),
		claimErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Name: "claim_errors_total",
			Help: "ResourceClaims the driver failed to prepare or unprepare, by operation and cause (not_allocated, unknown_config, not_on_node, no_spec, unhealthy_device, device_in_use, internal).",
		}, []string{"operation", "cause"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: MetricsNamespace, Name: "operation_duration_seconds",
			Help:    "Time to answer one NodePrepareResources or NodeUnprepareResources call of the kubelet (all its claims), by operation.",
			Buckets: xpunode.LatencyBuckets,
		}, []string{"operation"}),
		sliceWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Name: "resourceslice_writes_total",
			Help: "ResourceSlice writes the API server took, by operation (create, update, delete).",
		}, []string{"operation"}),
		sliceRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Name: "resourceslice_write_refusals_total",
			Help: "ResourceSlice writes the API server refused or did not answer, by operation and cause (invalid, forbidden, conflict, already_exists, not_found, unavailable, other).",
		}, []string{"operation", "cause"}),
		publishes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Name: "resourceslice_publishes_total",
			Help: "Times the driver handed the node's ResourceSlices to the publisher: at start and whenever the devices changed.",
		}),
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Name: "swept_claims_total",
			Help: "Records of prepared claims the driver forgot because the kubelet will not unprepare them, by reason: the ResourceClaim deleted, recreated (another UID), deallocated, not_on_node (no device of this driver on this node), unreserved (reserved for no pod).",
		}, []string{"reason"}),
		ScanMetrics: xpunode.NewScanMetrics(MetricsNamespace, "driver", "publishes its ResourceSlice again"),
	}
	// The series a dashboard plots exist from the start, at 0.
	for _, op := range []string{opPrepare, opUnprepare} {
		m.claims.WithLabelValues(op)
	}
	for _, r := range staleReasons {
		m.swept.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range append([]prometheus.Collector{m.claims, m.claimErrors, m.duration, m.sliceWrites, m.sliceRefusals, m.publishes, m.swept}, m.Collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the DRA driver's metrics: %w", err)
		}
	}
	return m, nil
}

// observeClaim counts one claim of op, failed with err or not.
func (m *metrics) observeClaim(op string, err error) {
	if err != nil {
		m.claimErrors.WithLabelValues(op, claimCause(err)).Inc()
		return
	}
	m.claims.WithLabelValues(op).Inc()
}

// since observes the duration of a call of op that started at start.
func (m *metrics) since(op string, start time.Time) {
	m.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// observeSliceWrite counts a ResourceSlice write of op that the API server
// took (err nil) or refused.
func (m *metrics) observeSliceWrite(op string, err error) {
	if err != nil {
		m.sliceRefusals.WithLabelValues(op, refusalCause(err)).Inc()
		return
	}
	m.sliceWrites.WithLabelValues(op).Inc()
}

// MetricNames lists the names of the series the driver exports (a
// histogram's _bucket, _sum and _count; the build-info gauge too), sorted:
// what the chart's dashboard may query.
func MetricNames() []string {
	reg := prometheus.NewRegistry()
	m, _ := newMetrics(reg)
	m.observeClaim(opPrepare, ErrNoSpec)
	m.since(opPrepare, time.Now())
	m.observeSliceWrite("create", nil)
	m.observeSliceWrite("create", errors.New("refused"))
	return daemon.MetricNames(reg, MetricsNamespace)
}
