package xpunode

import "github.com/prometheus/client_golang/prometheus"

// LatencyBuckets are the buckets of the daemons' latency histograms, in
// seconds: from 100 µs (an answer from memory) to 10 s (a kubelet
// deadline).
var LatencyBuckets = prometheus.ExponentialBucketsRange(0.0001, 10, 11)

// ScanMetrics are what the device plugin and the DRA driver count of
// their reads of the host: XPUs whose health changed, and re-layouts
// (ChangeTracker's). Their one label, health, has two values.
type ScanMetrics struct {
	HealthChanges *prometheus.CounterVec
	Relayouts     prometheus.Counter
	tracker       ChangeTracker
}

// NewScanMetrics returns the metrics under namespace; daemon names the
// daemon ("plugin", "driver") and then what it does after a re-layout,
// for the help text. Both health series exist from the start, at 0.
func NewScanMetrics(namespace, daemon, then string) *ScanMetrics {
	m := &ScanMetrics{
		HealthChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "device_health_changes_total",
			Help: "XPUs whose health changed between two reads of the host, by the health they changed to (Healthy, Unhealthy).",
		}, []string{"health"}),
		Relayouts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "relayouts_total",
			Help: "Changes of the node's XPUs the " + daemon + " observed (a partition layout applied, a card cut or put back whole, a function gone or back); the " + daemon + " then " + then + ".",
		}),
	}
	m.HealthChanges.WithLabelValues(Healthy)
	m.HealthChanges.WithLabelValues(Unhealthy)
	return m
}

// Collectors are the metrics, to register.
func (m *ScanMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.HealthChanges, m.Relayouts}
}

// Observe counts the health changes and re-layouts of a read of the host
// (not of one that failed).
func (m *ScanMetrics) Observe(sc Scan) {
	if sc.Host == nil {
		return
	}
	c := m.tracker.Observe(sc.Devices)
	m.HealthChanges.WithLabelValues(Healthy).Add(float64(c.ToHealthy))
	m.HealthChanges.WithLabelValues(Unhealthy).Add(float64(c.ToUnhealthy))
	if c.Relayout {
		m.Relayouts.Inc()
	}
}
