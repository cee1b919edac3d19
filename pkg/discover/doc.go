// Package discover finds the Kunlun XPUs of a host and the user-space driver
// files that go with them, without the vendor library and without running any
// program.
//
// Everything is read below two roots supplied by the caller: the dev root,
// under which /dev, /proc and /sys are read, and the driver root, under which
// the XRE libraries and tools are looked up. Nothing in this package names
// /dev, /proc or /sys on its own, which is what lets the tests run against
// fake host trees.
//
// Discovery is a chain of small Sources (device nodes, procfs, sysfs: the
// kernel's /sys/dev/char/MAJ:MIN entry of each node, the 4.x driver's
// /sys/class/xpu, the kunlun driver's PCI bindings; driver files). The device-node source decides which devices exist; the others only
// add facts to them. What a source cannot read is recorded on the device (or
// the host) as a problem and never guessed: a device without a readable sysfs
// entry has no PCI IDs, not made-up ones. Both driver generations are read:
// 4.x (/proc/xpu, /sys/class/xpu, XRE libraries in lib64) and 5.x (P800: no
// /proc/xpu, no /sys/class/xpu, the PCI function of a node found through
// /sys/dev/char, XRE libraries in so/, libxpunvidia-ml in the system library
// directory); a source a generation does not provide is a host note, not a
// problem. Nodes are never matched to PCI functions by address order, and
// every path read below the dev root, each directory and sysfs link on the
// way included, is resolved inside it (internal/fdio's Root: openat2
// RESOLVE_IN_ROOT): a symlinked /proc/xpu or /sys/module/kunlun cannot
// lead a read out of the tree. Discover logs nothing:
// warnings and notes are returned on the Host for the caller to print once.
//
// Machines: the driver libraries must be built for the machine xpu-cdi is
// built for (where the containers, and their loader, run), or the one
// WithArch names; an XRE library of another or an unknown machine is left
// out with a warning naming it, and only the driver root's ld.so.cache
// entries of that machine count. x86-64 and aarch64 are known; a build for
// another machine takes libraries of any.
//
// Library files are read with internal/elfso (SONAMEs, machines), the
// driver root's loader cache with internal/ldcache; neither, nor this
// package, depends on the container-root code of the hook (internal/rootfs).
//
// Guarantees: no exec, no network, no writes; directories read are /dev, the
// XRE library directories, /sys/bus/pci/drivers/kunlun and the sysfs/procfs
// entries of the devices found.
// With WithIndices, /dev and /sys/bus/pci/drivers/kunlun are not listed and
// only the entries of the selected devices are read.
// Not guaranteed: consistency with a host that changes while it is read.
//
// Stability: this package is part of xpu-cdi's public surface (with
// cdispec, runtimeconfig and logger); its exported names change only with
// a major version. Everything else of the module lives under internal/.
package discover
