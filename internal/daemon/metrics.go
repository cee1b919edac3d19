package daemon

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
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

// MetricNames lists the names of the series reg gathers whose name starts
// with namespace_ (a histogram's _bucket, _sum and _count), and
// namespace_build_info, sorted.
func MetricNames(reg prometheus.Gatherer, namespace string) []string {
	out := []string{namespace + "_build_info"}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, namespace+"_") {
			continue
		}
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			out = append(out, name+"_bucket", name+"_sum", name+"_count")
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
