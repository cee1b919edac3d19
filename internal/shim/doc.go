// Package shim is the core of xpu-container-runtime, the runc shim that
// gives Kunlun XPUs to engines without CDI (Docker 20.10, containerd 1.6).
//
// It reads runc's command line (ParseArgs), finds the low-level runtime
// (FindRuntime), reads the XPU request of a container from its bundle's
// config.json (cdi.k8s.io annotations except on CRI-O, which copies pod
// annotations into every container; the device plugin's mounts at
// xpurequest.MountDir; XPU_VISIBLE_DEVICES from privileged containers only,
// see Privileged; the policy is decideGrant's, in grant.go), resolves
// it to CDI container edits (from the CDI spec directories, through a cache
// of what the CDI library resolved from them, or from a spec built in memory
// from the host: the same edits `xpu-cdi generate` writes) and rewrites the
// members of config.json that the edits change, atomically (ModifyBundle).
//
// Guarantees: config.json is either replaced by the complete new spec or
// left byte for byte as it was; a bundle that asks for no XPU is not parsed
// beyond a substring scan and not written; nothing is written to stdout. It
// does not exec anything itself: the command does that.
package shim
