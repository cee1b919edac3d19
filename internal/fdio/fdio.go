// Package fdio reads files through bare descriptors, the one way xpu-cdi
// reads what a host tree or a container image may have shaped: opened
// without blocking (a FIFO without a writer returns at once), refused
// unless it is a regular file, bounded in size, and read with pread, without
// the os.File machinery (poller registration, finalizer) that every open
// would otherwise pay.
package fdio

import "errors"

// ErrNotRegular is wrapped by the errors for a file that is a FIFO, a
// device, a socket or a directory, refused before any read.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the errors for a file over the size its reader
// accepts.
var ErrTooLarge = errors.New("file too large")
