// Package exporter is the Prometheus collector of xpu-exporter: per-XPU
// metrics (facts, memory, utilisation, temperature, power, health, resets)
// for the devices the node offers (the compute devices of discovery, VFs of a
// partitioned card included), attributed to the pods that hold them through
// the kubelet's PodResources API.
//
// Every scrape reads the host again: discovery below the dev and driver
// roots, the driver's /proc/xpu on 4.x, the host's xpu-smi (package xpusmi,
// bounded) and PodResources List (bounded). A source that fails costs only
// its own series and sets xpu_exporter_source_up{source} to 0; the devices
// discovery knows are exported whatever xpu-smi does.
//
// It reads and never writes; the only program it runs is xpu-smi, by
// absolute path. Pod labels are the kubelet's names of a pod, its
// containers and its claims, never a pod's labels or annotations, so a pod
// can put nothing but its own names on a series.
package exporter
