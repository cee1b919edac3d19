package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewRegistry returns the metrics registry of one daemon: its
// NAMESPACE_build_info{version,commit} gauge (always 1) and the Go runtime
// and process collectors. The daemon registers its own metrics in it and
// serves it with WithMetrics; nothing goes to the default registry.
func NewRegistry(namespace, version, commit string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace:   namespace,
		Name:        "build_info",
		Help:        "Always 1; the labels are the version and commit the binary was built from.",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit},
	})
	info.Set(1)
	reg.MustRegister(info,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}
