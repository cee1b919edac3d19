// Package hook implements the work of xpu-runtime-hook, the OCI
// createContainer hook that CDI specs of this project name: reading the
// container state, updating the dynamic loader configuration of the
// container, and creating symlinks in it.
//
// Guarantees:
//
//   - Every path inside the container root is untrusted and resolved inside
//     that root (package rootfs): no symlink, ".." or absolute path in the
//     image can make the hook read, create or change anything outside it.
//
//   - Nothing is executed: the folders are scanned as ldconfig scans them
//     (scan.go, reading SONAMEs with package elfso through files opened
//     inside the root) and the loader cache is written by package ldcache
//     in pure Go, never by the image's (or the host's) ldconfig.
//
//   - Files are replaced atomically (temporary file, rename; no fsync: they
//     belong to a container being created, see package rootfs); a failed
//     update leaves the old file in place.
//
//   - Only the named folders are scanned, and a file whose content would not
//     change is not rewritten.
//
//   - Nothing is written into a directory on another mount than the
//     container root (a volume, a bind-mounted host directory), however the
//     image's symlinks lead there.
//
//   - What is read from the image is bounded: its ld.so.cache (MaxCacheSize,
//     MaxKeptEntries, MaxKeptBytes), the names of a library folder and the
//     files read in it (MaxDirEntries, MaxLibrariesPerDir);
//     only regular files are read, opened so that a FIFO never blocks.
//
// One rule for what the image controls: a change that the image's layout
// does not allow (a missing, dangling or looping path, a directory where a
// file belongs or the other way round, a magic link, another mount, a
// read-only file system, a non-symlink where a link goes) is logged as a
// warning and skipped, the other changes are made, and no error is returned,
// so the container starts. The one exception keeps its sentinel: ErrNoEtc
// (an image without /etc), which the command also turns into a warning.
// Other errors (an I/O error, a full disk) are returned. The package logs
// only through the logger it is given.
package hook
