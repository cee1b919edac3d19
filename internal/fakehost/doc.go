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
// behaviour of a real device; the files are a snapshot of a host at rest.
package fakehost
