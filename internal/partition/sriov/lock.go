package sriov

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/xpu-cdi/xpu-cdi/internal/partition"
)

// ErrLocked is wrapped by the error of LockLayout (and so of Apply) when
// another holder kept the lock longer than the caller would wait.
var ErrLocked = errors.New("another process is laying out this node's cards")

// Lock is the node's layout lock, held.
type Lock struct {
	fd   int
	path string
}

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// Announce writes the PCI addresses of the cards the holder is about to
// lay out into the lock file, for the device plugin and the DRA driver
// to withhold them (partition.LayingOut) until Unlock empties it.
func (l *Lock) Announce(addrs []string) error {
	data := []byte(strings.Join(addrs, "\n") + "\n")
	if err := unix.Ftruncate(l.fd, 0); err != nil {
		return fmt.Errorf("naming the cards being laid out: %w", &os.PathError{Op: "truncate", Path: l.path, Err: err})
	}
	if n, err := unix.Pwrite(l.fd, data, 0); err != nil || n != len(data) {
		if err == nil {
			err = fmt.Errorf("short write (%d of %d bytes)", n, len(data))
		}
		return fmt.Errorf("naming the cards being laid out: %w", &os.PathError{Op: "write", Path: l.path, Err: err})
	}
	return nil
}

// Unlock empties the list of cards being laid out and releases the lock.
// It may be called more than once.
func (l *Lock) Unlock() {
	if l != nil && l.fd >= 0 {
		_ = unix.Ftruncate(l.fd, 0)
		_ = unix.Close(l.fd)
		l.fd = -1
	}
}

// LockPath is the lock file of the host whose / is root.
func LockPath(root string) string {
	return filepath.Join(root, partition.LockDir, partition.LockFile)
}

// LockLayout takes the node's layout lock: the lock every writer of a
// card's sriov_numvfs on this node holds from its last look at the cards
// to its last write (Apply takes it only when a card is to change, and
// plans again under it). root is where the host's / is (see
// partition.LockDir); timeout bounds the wait for another holder (then
// ErrLocked; 0: one try), ctx cancels it. The directory root/run and below it run/xpu-cdi are created when
// missing (run 0755, xpu-cdi 0700, whatever the umask). No link is
// followed below root; run must be a directory owned by root or the
// caller that no one else may write, and run/xpu-cdi and the lock file
// the caller's own, which no one else may read, write or search, else the
// error wraps partition.ErrUnsafeLock and names the path (then remove it: the next
// lock creates it afresh). The caller of a real node is root, whose
// /run/xpu-cdi no one else can open.
func LockLayout(ctx context.Context, root string, timeout time.Duration) (*Lock, error) {
	fd, path, err := openLock(root)
	if err != nil {
		return nil, fmt.Errorf("taking the layout lock: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(context.Context) (bool, error) {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EWOULDBLOCK) || errors.Is(err, unix.EINTR):
			return false, nil
		}
		return false, fmt.Errorf("taking the layout lock: %w", &os.PathError{Op: "flock", Path: path, Err: err})
	})
	switch {
	case err == nil:
		return &Lock{fd: fd, path: path}, nil
	case ctx.Err() != nil:
		err = ctx.Err()
	case wait.Interrupted(err):
		err = fmt.Errorf("%w (%s held for more than %s): try again when it is done", ErrLocked, path, timeout)
	}
	_ = unix.Close(fd)
	return nil, err
}

// openLock opens (creating what is missing) root/run/xpu-cdi/partition.lock
// and checks every step; it returns the file's descriptor and path.
func openLock(root string) (int, string, error) {
	rootFD, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer func() { _ = unix.Close(rootFD) }()
	euid := uint32(os.Geteuid())

	run := filepath.Join(root, "run")
	runFD, err := openDirAt(rootFD, "run", run, 0o755, func(st *unix.Stat_t) error {
		if st.Uid != 0 && st.Uid != euid {
			return fmt.Errorf("%w: %s is owned by uid %d, not root", partition.ErrUnsafeLock, run, st.Uid)
		}
		if st.Mode&0o022 != 0 {
			return fmt.Errorf("%w: %s is mode %04o: another user may replace xpu-cdi in it", partition.ErrUnsafeLock, run, st.Mode&0o7777)
		}
		return nil
	})
	if err != nil {
		return -1, "", err
	}
	defer func() { _ = unix.Close(runFD) }()

	dir := filepath.Join(root, partition.LockDir)
	dirFD, err := openDirAt(runFD, filepath.Base(partition.LockDir), dir, 0o700, func(st *unix.Stat_t) error {
		return partition.Private(dir, st, euid)
	})
	if err != nil {
		return -1, "", err
	}
	defer func() { _ = unix.Close(dirFD) }()

	path := filepath.Join(dir, partition.LockFile)
	// O_NONBLOCK: a FIFO there does not hang the open (and is refused
	// below); O_NOFOLLOW: a link is not followed. Read-write: the holder
	// keeps the cards it lays out in the file (Announce).
	fd, err := unix.Openat(dirFD, partition.LockFile, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return -1, "", &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return -1, "", &os.PathError{Op: "stat", Path: path, Err: err}
	}
	err = partition.Private(path, &st, euid)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		err = fmt.Errorf("%w: %s is not a regular file", partition.ErrUnsafeLock, path)
	}
	if err == nil && st.Nlink != 1 {
		err = fmt.Errorf("%w: %s has %d links", partition.ErrUnsafeLock, path, st.Nlink)
	}
	if err != nil {
		_ = unix.Close(fd)
		return -1, "", err
	}
	return fd, path, nil
}

// openDirAt opens the directory name of parent (path for messages) without
// following a link, creating it with mode when missing (then set to
// exactly mode, whatever the umask), and checks it with check.
func openDirAt(parent int, name, path string, mode uint32, check func(*unix.Stat_t) error) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(parent, name, flags, 0)
	if errors.Is(err, unix.ENOENT) {
		merr := unix.Mkdirat(parent, name, mode)
		if merr != nil && !errors.Is(merr, unix.EEXIST) {
			return -1, &os.PathError{Op: "mkdir", Path: path, Err: merr}
		}
		fd, err = unix.Openat(parent, name, flags, 0)
		if err == nil && merr == nil {
			// Created here: exactly mode, whatever the umask.
			if err := unix.Fchmod(fd, mode); err != nil {
				_ = unix.Close(fd)
				return -1, &os.PathError{Op: "chmod", Path: path, Err: err}
			}
		}
	}
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return -1, fmt.Errorf("%w: %s is not a directory (a link is not followed)", partition.ErrUnsafeLock, path)
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return -1, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := check(&st); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
