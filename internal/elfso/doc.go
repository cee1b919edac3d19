// Package elfso reads ELF shared objects as ldconfig does, for both of
// xpu-cdi's library scans: driver discovery on the host (pkg/discover) and
// the hook's scan of container folders (internal/hook).
//
// Guarantees:
//   - SonameReader reads a file's DT_SONAME as ldconfig does (ELF header,
//     program headers, PT_DYNAMIC, one string; the last of repeated tags
//     counts), in a few bounded preads into reused buffers; hostile files
//     yield an error, never a panic or an allocation beyond those bounds.
//     It also gives the cache flags ldconfig records for the file's class
//     and machine (x86-64 0x0303, aarch64 0x0a03, ...) and the machine
//     itself.
//   - LibDir lists a directory once and reads the SONAMEs of its regular
//     files by name relative to it, without following a symlink, through
//     bare descriptors (fdio); what to do with symlinks and with several
//     files sharing a SONAME is the caller's policy.
//   - Arches lists the machines xpu-cdi supports with the flags their loader
//     accepts.
//   - Interpreter names the program the kernel loads to run an executable
//     (PT_INTERP, or a "#!" line), reading a bounded head, program header
//     table and path, each checked against the file's size; it lets a
//     caller say "its loader is missing" where execve says only ENOENT.
//
// It does not depend on container-root code (internal/rootfs): a caller
// that reads inside a container root opens the file there and hands it to
// LibDir.ReadOpen or SonameReader.
package elfso
