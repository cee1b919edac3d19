// Package fakehost builds fake Baidu Kunlun XPU hosts under a directory, for
// unit tests, end-to-end tests with real container engines, benchmarks and
// demos. No XPU is needed anywhere.
//
// A tree built under a root R has the shape of a real Kunlun host (see
// README.md in this directory for which real host each shape imitates and
// what was inferred, and docs/design.md, "Discovery", for what is read):
// device nodes under R/dev, the driver's procfs entries under R/proc, sysfs under R/sys and
// the XRE user space (real ELF shared objects with real SONAMEs, a static
// xpu_smi, ld.so.conf.d and ld.so.cache) under R/usr/local and R/etc. Both
// driver generations are built: 4.x (/proc/xpu, /sys/class/xpu, XRE 4 in
// lib64) and, with Host.Layout LayoutXRE5, 5.x as P800 hosts have it
// (/proc/kunlun, no xpu class, XRE 5 in so/, libxpunvidia-ml in
// R/lib/x86_64-linux-gnu, a dynamically linked xpu-smi); Host.NodeClass and
// Host.SysDevChar add a class of another name and the kernel's
// /sys/dev/char links (P800Sysfs). The same
// R serves as dev root and driver root. Every symbolic link is relative, so a
// tree can be moved or bind-mounted.
//
// Device nodes are real character devices (mknod) when the builder runs as
// root and the kernel allows it; otherwise they are empty regular files and
// (*Tree).NodeFacts supplies the major, minor, mode and owner the kernel would
// report. The returned Tree records everything that was built so tests can
// compare discovery against it.
//
// The ELF files are compiled with gcc once per build cache directory and then
// derived by patching placeholders in place, so a host with hundreds of
// libraries builds in milliseconds. Building needs gcc and a static glibc
// (libc6-dev) the first time a cache directory is used; a Host whose Arch
// is another machine (the aarch64 shape r200-arm64) is compiled with that
// machine's cross compiler (aarch64-linux-gnu-gcc, libc6-dev-arm64-cross)
// into a cache entry of its own.
//
// What it does not do: it does not imitate ioctls (cXPU), firmware or any
// behaviour of a real device; the files are a snapshot of a host at rest,
// with one exception, the fake SR-IOV kernel.
//
// # The fake SR-IOV kernel
//
// StartSRIOV(root, h, opts) (in tests fakehosttest.StartSRIOV) makes a built
// tree's SR-IOV behave as the kernel and the kunlun driver do, so that code
// laying out partitions runs unchanged against it. On every PF of h with
// Device.TotalVFs > 0 it moves the PF's directory content
// (/sys/devices/<PCIParent>/<bdf>) to a state directory outside the tree
// and mounts there a FUSE loopback of it (go-fuse, fstype
// fuse.xpu-fake-sriov, no entry or attribute caching); every file is the
// backing one but sriov_numvfs, whose reads give the current count and
// whose writes are the kernel's sriov_numvfs_store: EINVAL when not a
// kstrtou16 number, ERANGE above sriov_totalvfs, nothing for the current
// count, EBUSY for another nonzero count while VFs are enabled; only root
// may write (0644). A change is made as the kernel makes it: before the
// write returns, the VF PCI functions at the PF's next routing IDs
// (0000:03:00.0's VFs are 0000:03:00.1, .2 ...), as siblings of the PF's
// directory with the files and links Build writes for a VF (IDs, physfn,
// /sys/bus/pci/devices and the driver's links, the PF's virtfnK), their
// class devices and /sys/dev/char links as the host's layout has them and
// their procfs entries (/proc/xpu/devN on 4.x, /proc/kunlun/devN on 5.x);
// then, after SRIOVOptions.UdevDelay (50 ms by default), udev's part, the
// /dev/xpuN nodes, handled in order. New VFs take the lowest free indexes,
// their minors the index (driver 5.x) or 2*slot (4.x), their memory the
// partition table's (pkg/discover, partitions.go). Writing 0 removes all of
// it, the nodes again after the udev delay. Discovery of the tree then sees
// what a real host would, and SRIOVKernel.Host describes it.
//
// Tests inject failures with FailNext: FaultWriteError (the write fails
// with EIO, changing nothing), FaultNoNodes (the VFs appear, their nodes
// never do), FaultSlowUdev (the nodes come after SlowUdevDelay),
// FaultEnableError (the next write that would enable VFs fails with EIO,
// the writes of 0 before it go through). Writes
// logs every write with its result; Settle waits for udev.
//
// It needs root and /dev/fuse (testreq.FUSE). Close unmounts and puts the
// directories back with the VFs of the moment; fakehosttest.StartSRIOV
// closes at the test's cleanup, which runs before its temporary
// directories are removed, on failure and on panic too. A test binary
// killed before its cleanups (go test -timeout, SIGKILL) leaves mounts
// whose server is gone, which make removing the tree fail; the next
// StartSRIOV detaches every such dead fuse.xpu-fake-sriov mount (by hand:
// umount -l <mount point>). The mounts are in the test's mount namespace:
// a runtime that bind-mounts the tree recursively after StartSRIOV sees
// them.
//
// FakeOpenFD and RemoveFakeProcess fake a process holding a node open
// (<root>/proc/<pid>/fd/<fd> linking to <root>/dev/xpuN), for in-use checks
// that walk the dev root's /proc.
package fakehost
