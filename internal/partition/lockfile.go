package partition

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// The node's layout lock is the flock of LockFile in LockDir, below the
// root that stands for the host's / ("/" on the host, the --host-root in
// a container, a fake host's tree in the tests). The directory is the
// caller's own (root's, on a real node) and mode 0700: no other user can
// reach the file, so no other user can take or keep the lock. Every
// process that lays the node out (the boot unit, the chart's installer
// with the host's / at /host, a user's apply, the DRA driver cutting
// cards) takes it (package sriov); they share the host's /run. While it
// holds the lock, the writer keeps in the file the PCI addresses of the
// cards it lays out (LayingOut reads them).
const (
	LockDir  = "/run/xpu-cdi"
	LockFile = "partition.lock"
)

// ErrUnsafeLock is wrapped by an error of the layout lock when its
// directory or file is not the caller's own, private one: a lock another
// user could open is a lock another user could hold, and a list of cards
// another user could write would let that user hide cards.
var ErrUnsafeLock = errors.New("the layout lock is not private to its owner")

// maxLayingOut bounds the read of the cards being laid out: a PCI address
// and a newline per card.
const maxLayingOut = 64 << 10

// Private checks that the caller (euid) owns path and no one else has any
// access to it.
func Private(path string, st *unix.Stat_t, euid uint32) error {
	if st.Uid != euid {
		return fmt.Errorf("%w: %s is owned by uid %d, not by this process's uid %d: remove it", ErrUnsafeLock, path, st.Uid, euid)
	}
	if st.Mode&0o077 != 0 {
		return fmt.Errorf("%w: %s is mode %04o, open to other users: remove it", ErrUnsafeLock, path, st.Mode&0o7777)
	}
	return nil
}

// LayingOut returns the PCI addresses of the cards a writer is laying out
// now on the host whose / is root: those its layout lock names while it is
// held. Between the writes of a re-layout (0, then N) a card is whole, and
// its VFs come and go: the device plugin and the DRA driver offer none of
// its devices while it is listed. Nothing is listed when the lock does not
// exist or no one holds it (a writer that died left its list behind: the
// kernel released its lock). The lock is trusted as the writer trusts it:
// no link followed below root, LockDir and the file the caller's own and
// private, a regular file with one link; else the error wraps
// ErrUnsafeLock and nothing is listed. Taking the lock shared for an
// instant is how a holder is seen: a writer that tries then waits one
// poll.
func LayingOut(root string) ([]string, error) {
	euid := uint32(os.Geteuid())
	rootFD, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer func() { _ = unix.Close(rootFD) }()
	run := filepath.Join(root, "run")
	runFD, err := openDirNoFollow(rootFD, "run", run)
	if err != nil || runFD < 0 {
		return nil, err
	}
	defer func() { _ = unix.Close(runFD) }()
	var st unix.Stat_t
	if err := unix.Fstat(runFD, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: run, Err: err}
	}
	if (st.Uid != 0 && st.Uid != euid) || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("%w: %s is owned by uid %d, mode %04o: another user may replace xpu-cdi in it", ErrUnsafeLock, run, st.Uid, st.Mode&0o7777)
	}
	dir := filepath.Join(root, LockDir)
	dirFD, err := openDirNoFollow(runFD, filepath.Base(LockDir), dir)
	if err != nil || dirFD < 0 {
		return nil, err
	}
	defer func() { _ = unix.Close(dirFD) }()
	if err := unix.Fstat(dirFD, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	if err := Private(dir, &st, euid); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockFile)
	fd, err := unix.Openat(dirFD, LockFile, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer func() { _ = unix.Close(fd) }()
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := Private(path, &st, euid); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 {
		return nil, fmt.Errorf("%w: %s is not a regular file with one link", ErrUnsafeLock, path)
	}
	err = unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		_ = unix.Flock(fd, unix.LOCK_UN)
		return nil, nil
	}
	if !errors.Is(err, unix.EWOULDBLOCK) {
		return nil, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	b := make([]byte, maxLayingOut+1)
	n, err := fdio.ReadFullAt(fd, path, b, 0)
	if n > maxLayingOut {
		return nil, fmt.Errorf("%s lists more than %d bytes of cards", path, maxLayingOut)
	}
	if err != nil && n == 0 && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var addrs []string
	for _, line := range strings.Fields(string(b[:n])) {
		if !discover.IsPCIAddress(line) {
			return nil, fmt.Errorf("%s lists %q, not a PCI address", path, discover.CleanText(line))
		}
		addrs = append(addrs, line)
	}
	return addrs, nil
}

// openDirNoFollow opens the directory name of parent (path for messages)
// without following a link; -1 and no error when it does not exist.
func openDirNoFollow(parent int, name, path string) (int, error) {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return -1, nil
	case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR):
		return -1, fmt.Errorf("%w: %s is not a directory (a link is not followed)", ErrUnsafeLock, path)
	case err != nil:
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}
