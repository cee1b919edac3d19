// Package xpunode is the node-side model of the XPUs a node offers to
// Kubernetes, shared by xpu-device-plugin, xpu-dra-driver and xpu-exporter
// (which labels its per-XPU series with it): which devices
// are offered (the compute devices of discovery: a PF whose SR-IOV VFs are
// enabled is not), what they are named (the N of /dev/xpuN, which is also
// the CDI device name of the spec xpu-cdi writes), whether each can run work
// (the driver's procfs state, /dev/xpuctrl, a CDI spec that names it) and
// whether the CDI specs on the node still match the host. Scanner is the one
// scan of the daemons: discovery, the control node and spec checks, each
// condition logged once when it appears or changes (Notes); Device.Facts
// are what the node publishes about each device (discover.Host.FactsOf).
//
// It reads the CDI spec directories as engines do but writes nothing, and
// it says nothing about how a device reaches the kubelet (extended resource
// or ResourceSlice): the two kubelet-side daemons convert Device to their own
// API.
package xpunode
