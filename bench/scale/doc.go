// Package scale measures how the cluster side of xpu-cdi scales: the real
// kube-scheduler, kube-apiserver, kube-controller-manager and etcd of the
// test cluster (tests/e2e/harness, control plane only) against hundreds of
// simulated XPU nodes. A simulated node is a Node object that stays Ready
// and, for the DRA cases, the ResourceSlice xpu-dra-driver publishes for an
// 8-card P800 host: built by internal/dra's driver from the discovery of an
// internal/fakehost tree, not written by hand. No kubelet runs and no pod
// starts: what is measured is scheduling (creation to binding) and the API
// cost of the slices.
//
// TestScale runs it (make bench-scale sets its variables, see config.go);
// with no variable set it is the small run of CI: 50 nodes, 200 pods,
// cases a and b, which checks that every pod binds and that the report is
// written, and asserts nothing about time.
//
// TestUtilization is make bench-utilization (utilization.go, trace.go): on
// the same harness, a few nodes of 8 P800 each carry, in turn, the slices
// the driver publishes for static layouts (a fake host laid out per card,
// fakehost.Host.WithCardVFs, each layout one partition apply accepts) and
// for dynamic mode; one seeded trace of whole, half and quarter jobs
// (pods with a claim template asking for at least 96, 48 or 24 GiB) is
// played against each: created at its arrival, deleted its duration after
// its binding. It reports memory-time utilisation, jobs placed, waits and
// the scheduler's CPU per pod. With no XPU_UTIL_* variable it is the small
// run of CI (2 nodes, 20 jobs, one load), which checks that every policy
// ran and placed jobs, and asserts no figure.
//
// What it does not do: it does not run pods (no NodePrepareResources), it
// does not simulate kubelet heartbeats (the node lifecycle controller is
// off, as in upstream's scheduler_perf), and the figures of one machine are
// only comparable with each other, within one run.
package scale
