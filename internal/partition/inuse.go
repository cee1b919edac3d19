package partition

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Bounds of one scan of /proc/*/fd: a node has some thousands of
// processes, each some hundreds of descriptors; a scan that goes past
// these says so instead of taking minutes, and Apply then refuses to
// change a card (a process it did not look at may hold it). Variables
// for the tests.
var (
	maxPIDs     = 1 << 16
	maxFDsTotal = 1 << 21
	maxFDsPID   = 1 << 16
	scanTimeout = 10 * time.Second
)

// nodeKey identifies a device node: by st_rdev for a character device,
// by the file's identity (st_dev, st_ino) for a fake host's plain file.
type nodeKey struct {
	char     bool
	dev, ino uint64
}

// nodeOwner is the card and node a key stands for.
type nodeOwner struct {
	card int // index into the cards slice
	node string
}

// nodeKeys returns the keys of every card's PF and VF nodes. A node is
// matched by its device numbers (as discovery read them) and, when the
// node on the host is a plain file (a fake host without mknod), by its
// identity too.
func nodeKeys(h *discover.Host, cards []Card) map[nodeKey]nodeOwner {
	byIndex := map[int]int{}
	for i, c := range cards {
		if c.Index >= 0 {
			byIndex[c.Index] = i
		}
		for _, v := range c.VFs {
			byIndex[v.Index] = i
		}
	}
	keys := map[nodeKey]nodeOwner{}
	for _, d := range h.Devices {
		ci, ok := byIndex[d.Index]
		if !ok {
			continue
		}
		o := nodeOwner{card: ci, node: d.Node.Path}
		keys[nodeKey{char: true, dev: unix.Mkdev(d.Node.Major, d.Node.Minor)}] = o
		var st unix.Stat_t
		if err := unix.Lstat(d.Node.HostPath, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			keys[nodeKey{dev: uint64(st.Dev), ino: uint64(st.Ino)}] = o //nolint:unconvert // 32-bit st_dev
		}
	}
	return keys
}

// scanProcesses walks <devRoot>/proc/*/fd/* and returns, by card, the
// processes holding one of the cards' nodes open. Each fd is stat'ed
// (the magic link leads to the open file itself, which is all that is
// looked at); processes and descriptors that vanish meanwhile are
// skipped. The scan is bounded in processes, descriptors and time; what
// it could not look at is in the returned notes, and only that: notes
// mean the scan is incomplete.
func scanProcesses(ctx context.Context, devRoot string, keys map[nodeKey]nodeOwner) (_ map[int][]User, notes []string, _ error) {
	out := map[int][]User{}
	if len(keys) == 0 {
		return out, nil, nil
	}
	proc := filepath.Join(devRoot, "proc")
	pids, err := listPIDs(proc)
	if err != nil {
		return nil, nil, err
	}
	if len(pids) > maxPIDs {
		notes = append(notes, fmt.Sprintf("%s lists %d processes: only the first %d were looked at", proc, len(pids), maxPIDs))
		pids = pids[:maxPIDs]
	}
	deadline := time.Now().Add(scanTimeout)
	total := 0
	var denied []int
	defer func() {
		if len(denied) > 0 {
			notes = append(notes, deniedNote(proc, denied))
		}
	}()
	for _, pid := range pids {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if time.Now().After(deadline) || total >= maxFDsTotal {
			notes = append(notes, fmt.Sprintf("the scan of %s stopped at pid %d (%d descriptors looked at, %s): processes after it were not checked", proc, pid, total, scanTimeout))
			break
		}
		lim := min(maxFDsTotal-total, maxFDsPID)
		n, held, more, err := scanPID(proc, pid, keys, lim)
		total += n
		if more {
			notes = append(notes, fmt.Sprintf("%s/%d/fd holds more than %d descriptors: those after the first %d were not checked", proc, pid, lim, lim))
		}
		if err != nil {
			denied = append(denied, pid)
		}
		for _, u := range held {
			c := u.card
			user := User{PID: pid, Node: u.node}
			if !slices.ContainsFunc(out[c], func(x User) bool { return x.PID == pid && x.Node == u.node }) {
				user.Command = comm(proc, pid)
				out[c] = append(out[c], user)
			}
		}
	}
	return out, notes, nil
}

// listPIDs returns the numeric entries of proc, ascending.
func listPIDs(proc string) ([]int, error) {
	f, err := os.Open(proc)
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	defer f.Close()
	var pids []int
	for {
		names, err := f.Readdirnames(4096)
		for _, n := range names {
			if pid, err := strconv.Atoi(n); err == nil && pid > 0 && n == strconv.Itoa(pid) {
				pids = append(pids, pid)
			}
		}
		if errors.Is(err, io.EOF) || len(names) == 0 {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing processes in %s: %w", proc, err)
		}
		if len(pids) > maxPIDs {
			break
		}
	}
	slices.Sort(pids)
	return pids, nil
}

// deniedNote names the processes whose descriptors could not be read.
func deniedNote(proc string, pids []int) string {
	const shown = 8
	list := make([]string, 0, shown)
	for _, pid := range pids[:min(len(pids), shown)] {
		list = append(list, strconv.Itoa(pid))
	}
	more := ""
	if len(pids) > shown {
		more = fmt.Sprintf(" and %d more", len(pids)-shown)
	}
	return fmt.Sprintf("the descriptors of %d processes in %s could not be read (pid %s%s: permission denied; reading another user's /proc/PID/fd takes CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH)",
		len(pids), proc, strings.Join(list, ", "), more)
}

// scanPID stats the descriptors of one process, at most limit of them, and
// returns how many it looked at, the nodes it holds and whether it has
// more descriptors than it looked at. A process that is gone is skipped;
// one whose descriptors may not be read (another user's, without
// CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH, as in a container that drops
// them) is an error: it may hold a card.
func scanPID(proc string, pid int, keys map[nodeKey]nodeOwner, limit int) (int, []nodeOwner, bool, error) {
	dir := filepath.Join(proc, strconv.Itoa(pid), "fd")
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrPermission) {
		return 0, nil, false, err
	}
	if err != nil {
		return 0, nil, false, nil // gone
	}
	defer f.Close()
	names, _ := f.Readdirnames(limit + 1)
	more := len(names) > limit
	if more {
		names = names[:limit]
	}
	var held []nodeOwner
	for _, n := range names {
		k, ok := fdKey(filepath.Join(dir, n))
		if !ok {
			continue
		}
		if o, ok := keys[k]; ok && !slices.Contains(held, o) {
			held = append(held, o)
		}
	}
	return len(names), held, more, nil
}

// fdKey is the key of the file a descriptor link leads to, false for
// what is neither a character device nor a regular file. It never waits
// for a file system: the descriptor may be a file of a FUSE or NFS mount
// whose server hangs, and a plain stat(2) asks the server (FUSE GETATTR,
// an NFS revalidation) and waits for it without end. statx with
// AT_STATX_DONT_SYNC takes the attributes the kernel has, and asking only
// the type and inode spares NFS's flush of dirty pages before it answers
// a time (the device numbers come with every statx). A file system that
// ignores AT_STATX_DONT_SYNC can still block it (docs/security.md,
// "Partitions").
func fdKey(link string) (nodeKey, bool) {
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, link, unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE|unix.STATX_INO, &stx)
	if errors.Is(err, unix.ENOSYS) {
		// A kernel before 4.11: stat(2), which may wait.
		var st unix.Stat_t
		if err := unix.Stat(link, &st); err != nil {
			return nodeKey{}, false
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			return nodeKey{char: true, dev: uint64(st.Rdev)}, true //nolint:unconvert // 32-bit st_rdev
		case unix.S_IFREG:
			return nodeKey{dev: uint64(st.Dev), ino: uint64(st.Ino)}, true //nolint:unconvert // 32-bit st_dev
		}
		return nodeKey{}, false
	}
	if err != nil {
		return nodeKey{}, false
	}
	switch uint32(stx.Mode) & unix.S_IFMT {
	case unix.S_IFCHR:
		return nodeKey{char: true, dev: unix.Mkdev(stx.Rdev_major, stx.Rdev_minor)}, true
	case unix.S_IFREG:
		return nodeKey{dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), ino: stx.Ino}, true
	}
	return nodeKey{}, false
}

// comm is a process's command name (/proc/PID/comm), "" when unreadable.
// The process chose it (PR_SET_NAME takes any bytes but NUL), so it is
// escaped (discover.CleanText): it is printed to the admin's terminal.
func comm(proc string, pid int) string {
	f, err := os.Open(filepath.Join(proc, strconv.Itoa(pid), "comm"))
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, 64)
	n, _ := io.ReadFull(f, b)
	return discover.CleanText(strings.TrimSpace(string(b[:n])))
}
