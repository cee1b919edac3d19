package sriov

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// The node's layout lock is the flock of LockFile in LockDir, below the
// root that stands for the host's / ("/" on the host, the --host-root in
// a container, a fake host's tree in the tests). The directory is the
// caller's own (root's, on a real node) and mode 0700: no other user can
// reach the file, so no other user can take or keep the lock. Every
// process that lays the node out (the boot unit, the chart's installer
// with the host's / at /host, a user's apply, the DRA driver cutting
// cards) takes it; they share the host's /run.
const (
	LockDir  = "/run/xpu-cdi"
	LockFile = "partition.lock"
)

// ErrLocked is wrapped by the error of LockLayout (and so of Apply) when
// another holder kept the lock longer than the caller would wait.
var ErrLocked = errors.New("another process is laying out this node's cards")

// ErrUnsafeLock is wrapped by LockLayout's error when the lock's
// directory or file is not the caller's own, private one: a lock another
// user could open is a lock another user could hold.
var ErrUnsafeLock = errors.New("the layout lock is not private to its owner")

// Lock is the node's layout lock, held.
type Lock struct {
	fd   int
	path string
}

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// Unlock releases the lock. It may be called more than once.
func (l *Lock) Unlock() {
	if l != nil && l.fd >= 0 {
		_ = unix.Close(l.fd)
		l.fd = -1
	}
}

// LockPath is the lock file of the host whose / is root.
func LockPath(root string) string {
	return filepath.Join(root, LockDir, LockFile)
}

// LockLayout takes the node's layout lock: the lock every writer of a
// card's sriov_numvfs on this node holds from its last look at the cards
// to its last write (Apply takes it only when a card is to change, and
// plans again under it). root is where the host's / is (see LockDir);
// wait bounds the wait for another holder (then ErrLocked), ctx cancels
// it. The directory root/run and below it run/xpu-cdi are created when
// missing (run 0755, xpu-cdi 0700, whatever the umask). No link is
// followed below root; run must be a directory owned by root or the
// caller that no one else may write, and run/xpu-cdi and the lock file
// the caller's own, which no one else may read, write or search, else the
// error wraps ErrUnsafeLock and names the path (then remove it: the next
// lock creates it afresh). The caller of a real node is root, whose
// /run/xpu-cdi no one else can open.
func LockLayout(ctx context.Context, root string, wait time.Duration) (*Lock, error) {
	fd, path, err := openLock(root)
	if err != nil {
		return nil, fmt.Errorf("taking the layout lock: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &Lock{fd: fd, path: path}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = unix.Close(fd)
			return nil, fmt.Errorf("taking the layout lock: %w", &os.PathError{Op: "flock", Path: path, Err: err})
		}
		if !time.Now().Before(deadline) {
			_ = unix.Close(fd)
			return nil, fmt.Errorf("%w (%s held for more than %s): try again when it is done", ErrLocked, path, wait)
		}
		select {
		case <-ctx.Done():
			_ = unix.Close(fd)
			return nil, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
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
			return fmt.Errorf("%w: %s is owned by uid %d, not root", ErrUnsafeLock, run, st.Uid)
		}
		if st.Mode&0o022 != 0 {
			return fmt.Errorf("%w: %s is mode %04o: another user may replace xpu-cdi in it", ErrUnsafeLock, run, st.Mode&0o7777)
		}
		return nil
	})
	if err != nil {
		return -1, "", err
	}
	defer func() { _ = unix.Close(runFD) }()

	dir := filepath.Join(root, LockDir)
	dirFD, err := openDirAt(runFD, filepath.Base(LockDir), dir, 0o700, func(st *unix.Stat_t) error {
		return private(dir, st, euid)
	})
	if err != nil {
		return -1, "", err
	}
	defer func() { _ = unix.Close(dirFD) }()

	path := filepath.Join(dir, LockFile)
	// O_NONBLOCK: a FIFO there does not hang the open (and is refused
	// below); O_NOFOLLOW: a link is not followed. Read-only is enough
	// for flock.
	fd, err := unix.Openat(dirFD, LockFile, unix.O_RDONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return -1, "", &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return -1, "", &os.PathError{Op: "stat", Path: path, Err: err}
	}
	err = private(path, &st, euid)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		err = fmt.Errorf("%w: %s is not a regular file", ErrUnsafeLock, path)
	}
	if err == nil && st.Nlink != 1 {
		err = fmt.Errorf("%w: %s has %d links", ErrUnsafeLock, path, st.Nlink)
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
		return -1, fmt.Errorf("%w: %s is not a directory (a link is not followed)", ErrUnsafeLock, path)
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

// private checks that the caller owns path and no one else has any access
// to it.
func private(path string, st *unix.Stat_t, euid uint32) error {
	if st.Uid != euid {
		return fmt.Errorf("%w: %s is owned by uid %d, not by this process's uid %d: remove it", ErrUnsafeLock, path, st.Uid, euid)
	}
	if st.Mode&0o077 != 0 {
		return fmt.Errorf("%w: %s is mode %04o, open to other users: remove it", ErrUnsafeLock, path, st.Mode&0o7777)
	}
	return nil
}
