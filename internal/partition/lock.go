package partition

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// lockDir is the directory whose flock serialises the applies of one node:
// every PF's directory is linked from it, it exists on every host with PCI,
// and every process that lays the node out (the boot unit, the chart's
// installer with the host's / at --host-root, a user's apply) sees the same
// directory, with nothing created on the host.
const lockDir = "/sys/bus/pci/devices"

// ErrLocked is wrapped by Apply's error when another apply kept the node
// for longer than this one would wait.
var ErrLocked = errors.New("another partition apply is laying out this node")

// lockNode takes the node's apply lock, waiting at most wait; the returned
// function releases it.
func lockNode(ctx context.Context, devRoot string, wait time.Duration) (func(), error) {
	dir := filepath.Join(devRoot, lockDir)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		// No PCI sysfs: nothing can be written either, and the plan says
		// why.
		return func() {}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("locking the node's layout: %w", &os.PathError{Op: "open", Path: dir, Err: err})
	}
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Close(fd) }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = unix.Close(fd)
			return nil, fmt.Errorf("locking %s: %w", dir, err)
		}
		if !time.Now().Before(deadline) {
			_ = unix.Close(fd)
			return nil, fmt.Errorf("%w (flock on %s held for more than %s): try again when it is done", ErrLocked, dir, wait)
		}
		select {
		case <-ctx.Done():
			_ = unix.Close(fd)
			return nil, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}
