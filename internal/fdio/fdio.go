// Package fdio reads files through bare descriptors, the one way xpu-cdi
// reads what a host tree or a container image may have shaped: opened
// without blocking (a FIFO without a writer returns at once), refused
// unless it is a regular file, bounded in size, and read with pread, without
// the os.File machinery (poller registration, finalizer) that every open
// would otherwise pay.
//
// Open and ReadFileAt, the readers of libraries, loader caches and
// configuration files, also refuse a file on a kernel file system (procfs,
// sysfs, debugfs, tracefs, securityfs, cgroupfs, bpffs, configfs, ...;
// CheckOrdinaryFS) before any byte is read: there a "regular file" can be
// /proc/kmsg, whose read takes the host's kernel log from its other
// readers. OpenRegularAt does not: discovery reads procfs and sysfs with it.
//
// Root opens paths below a host tree (a dev root) with every directory on
// the way resolved inside it (openat2 RESOLVE_IN_ROOT), for the readers of
// procfs and sysfs below a dev root: discovery and the exporter.
package fdio

import "errors"

// ErrNotRegular is wrapped by the errors for a file that is a FIFO, a
// device, a socket or a directory, refused before any read.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the errors for a file over the size its reader
// accepts.
var ErrTooLarge = errors.New("file too large")

// ErrKernelFS is wrapped by the errors for a file on a kernel file system
// (procfs, sysfs, ...), refused before any read.
var ErrKernelFS = errors.New("on a kernel file system, not an ordinary one")
