// Package exporter is the Prometheus collector of xpu-exporter: per-XPU
// metrics (facts, memory, utilisation, temperature, power, health, resets)
// for the devices the node offers (the compute devices of discovery, VFs of a
// partitioned card included), attributed to the pods that hold them through
// the kubelet's PodResources API.
//
// A collection reads the host again: discovery below the dev and driver
// roots, the driver's /proc/xpu on 4.x, the host's xpu-smi (package xpusmi,
// bounded) and PodResources List (bounded). A source that fails costs only
// its own series and sets xpu_exporter_source_up{source} to 0; the devices
// discovery knows are exported whatever xpu-smi does. Scrapes share
// collections (Config.MinInterval; one at a time, never waited on longer
// than Config.Wait), so scrapers do not choose how often xpu-smi runs, and
// an xpu-smi that never ends holds no scrape (collection.go).
//
// The series are bounded: at most Config.MaxPodsPerXPU holders per XPU,
// each pod's containers folded into one (holders.go); what is logged of a
// failing source is bounded too (report.go).
//
// It reads and never writes; the only program it runs is xpu-smi, by
// absolute path. Holder labels are the kubelet's names of a pod, its
// containers and its claims, never a pod's labels or annotations, so a pod
// can put nothing but its own names on a series.
package exporter
