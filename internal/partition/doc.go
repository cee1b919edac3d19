// Package partition lays out the SR-IOV partitions (VFs) of a node's
// Kunlun cards: it reads layouts (SELECTOR=N lists), checks them against
// the host and the public partition facts (pkg/discover's partition
// table), and applies them through the kernel's standard SR-IOV interface,
// sriov_numvfs.
package partition
