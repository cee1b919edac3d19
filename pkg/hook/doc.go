// Package hook implements the work of xpu-runtime-hook, the OCI
// createContainer hook that CDI specs of this project name: reading the
// container state, updating the dynamic loader configuration of the
// container, and creating symlinks in it.
//
// Guarantees:
//   - Every path inside the container root is untrusted and resolved inside
//     that root (package rootfs): no symlink, ".." or absolute path in the
//     image can make the hook read, create or change anything outside it.
//   - Nothing is executed: the loader cache is written by package ldcache in
//     pure Go, never by the image's (or the host's) ldconfig.
//   - Files are replaced atomically (temporary file, rename; no fsync: they
//     belong to a container being created, see package rootfs); a failed
//     update leaves the old file in place.
//   - Only the named folders are scanned, and a file whose content would not
//     change is not rewritten.
//
// Errors that must not stop a container from starting are recognisable with
// errors.Is: ErrNoEtc (an image without /etc) and unix.EROFS (a read-only
// root filesystem or file). The caller (the command) decides to warn on
// those and exit 0. The package logs only through the logger it is given.
package hook
