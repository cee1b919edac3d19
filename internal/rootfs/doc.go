// Package rootfs opens files and directories inside a directory tree that
// somebody else controls (a container image's root filesystem), so that no
// path, symlink or ".." component in that tree can make the caller read,
// create or replace anything outside it.
//
// Guarantees:
//   - Every lookup resolves the untrusted path as if the root were "/"
//     (openat2 RESOLVE_IN_ROOT, with filepath-securejoin's pathrs-lite as the
//     fallback on kernels without openat2): absolute symlinks and ".." are
//     clamped to the root. Magic links (/proc/self/...) are refused.
//   - OpenFile and OpenRegular return only regular files and never open a
//     device node, FIFO or socket (the type is checked on an O_PATH handle
//     first, and again on the opened file), nor a file of a kernel file
//     system (procfs, sysfs, ...: fdio.CheckOrdinaryFS on the O_PATH handle,
//     before it is opened for reading). OpenRegular's File is a bare
//     descriptor for preads, without the *os.File machinery.
//   - A directory opened for writing (OpenDirForWrite, MkdirAll) is resolved
//     without crossing a mount point (RESOLVE_NO_XDEV; with the fallback, and
//     after openat2 too, its mount ID is compared with the root's): a symlink
//     in the image cannot lead a write into a volume or bind mount, which is
//     a host directory (ErrCrossesMount, EXDEV). Reading through mounts (the
//     libraries the runtime bind-mounted) stays allowed.
//   - Files are created only by name relative to a directory handle that was
//     resolved inside the root, with O_EXCL|O_NOFOLLOW, and moved into place
//     with renameat: an existing symlink at the destination is replaced, never
//     followed. WriteFileAtomic writes a temporary file and renames it, so
//     readers see either the old or the new content. It does not fsync: the
//     files it writes live in a container's root while the container is
//     being created, where a crash ends that creation and the next one
//     writes them again (as engines write /etc/hosts), while fsyncs would be
//     a large part of the hook's time on a disk-backed root
//     (docs/benchmarks.md).
//
// It does not protect against a process that concurrently rewrites the tree
// while we walk it beyond what the kernel's RESOLVE_IN_ROOT guarantees (the
// results stay inside the root, but may mix old and new states).
package rootfs
