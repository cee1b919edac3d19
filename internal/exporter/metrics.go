package exporter

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metric is a name and its help.
type metric struct{ name, help string }

// The metrics (Prometheus naming: base units, _total for counters).
var (
	metricInfo            = metric{"xpu_info", "Facts of the XPU (value 1): family, serial, driver and XRE versions."}
	metricMemoryUsed      = metric{"xpu_memory_used_bytes", "Device memory in use, from xpu-smi."}
	metricMemoryTotal     = metric{"xpu_memory_total_bytes", "Device memory, from xpu-smi or else from the driver."}
	metricUtilization     = metric{"xpu_utilization_ratio", "How busy the XPU is, 0 to 1, from xpu-smi."}
	metricTemperature     = metric{"xpu_temperature_celsius", "Temperature of the XPU, from xpu-smi."}
	metricPower           = metric{"xpu_power_watts", "Power draw of the XPU, from xpu-smi."}
	metricHealthy         = metric{"xpu_healthy", "1 when the XPU can run work (the device plugin's and the DRA driver's judgement), else 0."}
	metricHealthInfo      = metric{"xpu_health_info", "Why the XPU is unhealthy (value 1; only for unhealthy XPUs)."}
	metricResets          = metric{"xpu_resets_total", "Resets of the XPU, from /proc/xpu/devN/reset_count (driver 4.x)."}
	metricCollectDuration = metric{"xpu_exporter_collect_duration_seconds", "How long the last collection took."}
	metricSourceUp        = metric{"xpu_exporter_source_up", "1 when the source could be read at the last collection, else 0."}
	metricSkippedLines    = metric{"xpu_exporter_xpu_smi_skipped_lines", "Lines of xpu-smi -m output skipped at the last collection because they were not in the expected layout."}
	metricUnlistedPods    = metric{"xpu_unlisted_holder_pods", "Pods holding the XPU that have no series of their own (beyond the exporter's --max-pods-per-xpu)."}
	metricStale           = metric{"xpu_exporter_collection_stale", "1 when the scrape got the last finished collection because the one in progress did not end in time, else 0."}
	metricAge             = metric{"xpu_exporter_collection_age_seconds", "How long ago the collection whose series the scrape got started."}
)

// MetricNames lists every metric the collector may export (the dashboard's
// queries are checked against it).
func MetricNames() []string {
	var out []string
	all := []metric{
		metricInfo, metricMemoryUsed, metricMemoryTotal, metricUtilization, metricTemperature, metricPower,
		metricHealthy, metricHealthInfo, metricResets, metricCollectDuration, metricSourceUp, metricSkippedLines,
		metricUnlistedPods, metricStale, metricAge,
	}
	for _, m := range all {
		out = append(out, m.name)
	}
	return out
}

// emitter builds const metrics of varying label names.
type emitter struct {
	metrics []prometheus.Metric
	c       *Collector
}

func (e *emitter) send(m metric, typ prometheus.ValueType, v float64, names, values []string) {
	pm, err := prometheus.NewConstMetric(prometheus.NewDesc(m.name, m.help, names, nil), typ, v, values...)
	if err != nil {
		// A label value that is not UTF-8 (a serial read from procfs).
		e.c.report("metrics", fmt.Sprintf("%s %v: %v", m.name, values, err))
		return
	}
	e.metrics = append(e.metrics, pm)
}

func (e *emitter) gauge(m metric, v float64, names, values []string) {
	e.send(m, prometheus.GaugeValue, v, names, values)
}

func (e *emitter) counter(m metric, v float64, names, values []string) {
	e.send(m, prometheus.CounterValue, v, names, values)
}

func (e *emitter) up(source string, ok bool) {
	v := 0.0
	if ok {
		v = 1
	}
	e.gauge(metricSourceUp, v, []string{"source"}, []string{source})
}

// The holder labels: the namespace, pod and container holding the XPU. They
// are not pod, namespace and container, which Prometheus' Kubernetes
// discovery (and the Prometheus operator's ServiceMonitor) give every
// series of a target as the exporter pod's own: with honor_labels those
// would fill the empty holder labels of a free XPU with the exporter's pod,
// and without it they would be renamed to these names anyway (the
// exported_ prefix of a clash), as dcgm-exporter's users know them.
const (
	LabelNamespace = "exported_namespace"
	LabelPod       = "exported_pod"
	LabelContainer = "exported_container"
)

// LabelNames lists every label the collector's series may carry (the
// dashboard's groupings are checked against it).
func LabelNames() []string {
	return []string{
		"xpu", "pci_bus_id", "model", "parent_pci_bus_id",
		"family", "serial", "driver_version", "xre_version", "reason",
		LabelNamespace, LabelPod, LabelContainer, "claim", "claim_namespace",
		"source",
	}
}
