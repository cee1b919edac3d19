// Package dra is the node side of xpu-dra-driver, the Kubernetes Dynamic
// Resource Allocation (DRA) driver of xpu-cdi, on the kubelet plugin helper
// of k8s.io/dynamic-resource-allocation.
//
// What it guarantees:
//   - The node's ResourceSlice has one device per XPU that package xpunode
//     offers (the compute devices of discovery, the same set the device
//     plugin advertises), named xpu-<N> after /dev/xpuN, with attributes for
//     what the host tells (see attributes.go). It is published again
//     whenever a poll of the host finds a change; a node without XPU
//     publishes an empty slice.
//   - A device that cannot run work (an error state in procfs, no
//     /dev/xpuctrl, no CDI spec naming it) keeps its place in the slice with
//     a NoSchedule taint that says why: the scheduler allocates it to no new
//     claim, running pods are not evicted.
//   - Prepare answers only CDI names of the node's spec (baidu.com/xpu=N),
//     after checking that a spec in the CDI directories names the device;
//     it writes no per-claim CDI spec, so nothing a prepared claim needs
//     lives in /var/run/cdi apart from the node spec that xpu-cdi refresh
//     re-creates at boot (kubernetes/kubernetes#141433: the kubelet
//     checkpoints a claim as prepared before a reboot).
//   - Prepare and Unprepare are idempotent. What was prepared is kept per
//     claim in the plugin's data directory (not tmpfs), so that a restarted
//     driver still refuses to hand a device of one claim to another claim.
//
// What it does not do: it takes no claim parameters (an opaque config for
// this driver is refused), writes no CDI spec and does not isolate the
// memory or faults of pods that share a claim.
package dra
