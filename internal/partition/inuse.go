package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// The scan of <devRoot>/proc has no bound in processes or descriptors: a
// process that holds no card must not be able to stop a layout by
// holding many descriptors (a proxy with 100k sockets does so with no
// attacker). Its last bound is time. A descriptor costs some
// microseconds (a readdir entry and a statx; 3 to 10 µs on a small VM,
// docs/benchmarks.md), so the bound covers millions of them; a scan that
// still runs out of it names the processes with the most descriptors and
// Apply refuses (--ignore-incomplete-scan overrides). Variables for the
// tests.
var (
	scanTimeout = 60 * time.Second
	// scanWorkers is how many processes (and batches of one process's
	// descriptors) are looked at at once: the kernel's side of a statx
	// through /proc/PID/fd scales with the cores. With 1, the scan runs
	// on the caller's goroutine (a test's thread without capabilities).
	scanWorkers = min(max(runtime.GOMAXPROCS(0), 2), 16)
)

const (
	// fdBatch is how many descriptor names are read and stat'ed at a time.
	fdBatch = 4096
	// mapsLineMax bounds a line of /proc/PID/maps: the kernel writes a
	// path of at most PATH_MAX after some 100 bytes of fields.
	mapsLineMax = 8192
	// heavyShown is how many of the processes with the most descriptors
	// an incomplete scan names.
	heavyShown = 5
	// kcmpFiles is KCMP_FILES of linux/kcmp.h: do two tasks share their
	// descriptor table.
	kcmpFiles = 2
	// maxTablesCompared bounds the tables a thread's is compared with: a
	// process whose every thread has a table of its own costs a table
	// read per thread, not a kcmp per pair.
	maxTablesCompared = 8
)

// nodeKey identifies a device node: by st_rdev for a character device,
// by the file's identity (st_dev, st_ino) for a fake host's plain file
// and for a memory mapping (/proc/PID/maps names the file's identity).
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
// matched by its device numbers (as discovery read them) and by the
// identity of the node on the host: a plain file on a fake host without
// mknod, and the inode a mapping of the node names in /proc/PID/maps.
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
		if err := unix.Lstat(d.Node.HostPath, &st); err == nil && (st.Mode&unix.S_IFMT == unix.S_IFREG || st.Mode&unix.S_IFMT == unix.S_IFCHR) {
			keys[nodeKey{dev: uint64(st.Dev), ino: uint64(st.Ino)}] = o //nolint:unconvert // 32-bit st_dev
		}
	}
	return keys
}

// scanProcesses looks at every process of <devRoot>/proc and returns, by
// card, the processes holding one of the cards' nodes: open in the
// descriptor table of any of its threads (/proc/PID/fd and, for a thread
// with a table of its own, /proc/PID/task/TID/fd), or mapped
// (/proc/PID/maps). Processes, threads and descriptors that vanish
// meanwhile are skipped. What it could not look at is in the returned
// notes, and only that: notes mean the scan is incomplete.
func scanProcesses(ctx context.Context, devRoot string, keys map[nodeKey]nodeOwner) (_ map[int][]User, notes []string, _ error) {
	if len(keys) == 0 {
		return map[int][]User{}, nil, nil
	}
	proc := filepath.Join(devRoot, "proc")
	pids, err := listPIDs(proc)
	if err != nil {
		return nil, nil, err
	}
	s := &scan{
		proc: proc, keys: keys, kcmp: procIsOurs(proc),
		slots: make(chan struct{}, scanWorkers),
		out:   map[int][]User{}, procs: map[int]*procCount{}, mapped: map[nodeKey]classified{},
	}
	sctx, cancel := context.WithTimeout(ctx, scanTimeout)
	defer cancel()
	start := time.Now()
	reached := s.run(sctx, pids)
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	return s.result(devRoot, len(pids)-reached, time.Since(start))
}

// scan is one scan of a /proc. Its state is shared by the goroutines
// looking at processes; once run returned (at the time bound, goroutines
// may still be blocked in the kernel) it is only read under mu.
type scan struct {
	proc string
	keys map[nodeKey]nodeOwner
	// kcmp says proc is the procfs of this process's PID namespace: its
	// PIDs may be given to kcmp(2).
	kcmp  bool
	slots chan struct{}

	descriptors atomic.Int64
	noMapFiles  atomic.Bool // map_files may not be followed (no capability)

	mu     sync.Mutex
	done   bool // run returned: later findings are not taken
	out    map[int][]User
	denied []int
	broken []string
	procs  map[int]*procCount
	mapped map[nodeKey]classified
}

// procCount is what the scan knows of a process: whose it is, how many
// descriptors it looked at, whether it finished it.
type procCount struct {
	pid, uid int
	fds      atomic.Int64
	finished bool
}

// classified is what the file of a mapping turned out to be: the key of a
// character device, or nothing to match.
type classified struct {
	key  nodeKey
	char bool
}

// run looks at the pids, scanWorkers at a time, until they are done or
// ctx is; it returns how many it started.
func (s *scan) run(ctx context.Context, pids []int) int {
	var wg sync.WaitGroup
	started := 0
	for _, pid := range pids {
		took := false
		select {
		case s.slots <- struct{}{}:
			took = true
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			if took { // both were ready
				<-s.slots
			}
			break
		}
		started++
		if cap(s.slots) == 1 {
			// One worker: on the caller's goroutine (and thread).
			s.process(ctx, pid)
			<-s.slots
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-s.slots; wg.Done() }()
			s.process(ctx, pid)
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		// A read of a process's maps or a statx the kernel does not let
		// go of does not hold the scan past its bound.
	}
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	return started
}

// process looks at one process: each of its threads' descriptor tables
// and its mappings.
func (s *scan) process(ctx context.Context, pid int) {
	dir, err := unix.Open(filepath.Join(s.proc, strconv.Itoa(pid)), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if permissionError(err) {
			s.deny(pid)
		}
		return // gone
	}
	defer func() { _ = unix.Close(dir) }()
	var st unix.Stat_t
	if err := unix.Fstat(dir, &st); err != nil {
		return
	}
	pc := &procCount{pid: pid, uid: int(st.Uid)}
	s.mu.Lock()
	s.procs[pid] = pc
	s.mu.Unlock()

	tids := listTasks(dir)
	complete := true
	// The tasks whose tables were read. A dead leader (a zombie whose
	// threads live on) has released its table; its fd directory, owned
	// by root then, is not read.
	var read []int
	if !deadLeader(dir) {
		complete = s.table(ctx, pc, dir, "fd")
		read = append(read, pid)
	}
	for _, tid := range tids {
		if tid == pid || !complete {
			continue
		}
		// A thread shares its leader's table unless it was made without
		// CLONE_FILES or unshared it; a table of its own is scanned.
		// kcmp proves the sharing (with one of the first tables read);
		// without it, every table is scanned.
		if s.kcmp && slices.ContainsFunc(read[:min(len(read), maxTablesCompared)], func(r int) bool { return sameFiles(r, tid) }) {
			continue
		}
		complete = s.table(ctx, pc, dir, "task/"+strconv.Itoa(tid)+"/fd")
		read = append(read, tid)
	}
	if complete {
		complete = s.mappings(ctx, pc, dir, tids)
	}
	s.mu.Lock()
	pc.finished = complete
	s.mu.Unlock()
}

// listTasks returns the thread IDs of the process whose /proc directory
// is dir, none when it has no task directory (a fake host's process).
func listTasks(dir int) []int {
	fd, err := unix.Openat(dir, "task", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), "task")
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	var tids []int
	for _, n := range names {
		if tid, err := strconv.Atoi(n); err == nil && tid > 0 {
			tids = append(tids, tid)
		}
	}
	slices.Sort(tids)
	return tids
}

// deadLeader reports whether the thread-group leader of the process
// whose /proc directory is dir has exited (state Z or X in its stat:
// the kernel wrote it, after the command name in parentheses).
func deadLeader(dir int) bool {
	fd, err := unix.Openat(dir, "stat", unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer func() { _ = unix.Close(fd) }()
	b := make([]byte, 512)
	n, _ := unix.Read(fd, b)
	b = b[:max(n, 0)]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'Z' || b[i+2] == 'X'
}

// sameFiles reports whether kcmp(2) says tasks a and b share one
// descriptor table; false when it cannot tell (no kcmp, a task gone).
func sameFiles(a, b int) bool {
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(a), uintptr(b), kcmpFiles, 0, 0, 0)
	return errno == 0 && r == 0
}

// procIsOurs reports whether proc is the procfs of this process's PID
// namespace (then its PIDs are the ones kcmp takes). proc/self is this
// process as proc's namespace sees it, and its status's NSpid lists its
// PIDs from that namespace down to its own: one PID, this process's own,
// proves the namespace is its own. False when it cannot tell (a kernel
// before 4.1, a fake host's /proc, the host's procfs in a container):
// then every thread's table is scanned.
func procIsOurs(proc string) bool {
	b, n := readProcText(filepath.Join(proc, "self", "status"), 4096)
	for line := range strings.SplitSeq(string(b[:n]), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return slices.Equal(strings.Fields(rest), []string{strconv.Itoa(os.Getpid())})
		}
	}
	return false
}

// table stats every descriptor of one table (dir's path names it
// relative to the process's /proc directory), in batches that run in
// parallel when a slot is free. It returns false when it did not finish
// (out of time, or the table may not be read).
func (s *scan) table(ctx context.Context, pc *procCount, dir int, path string) bool {
	fd, err := unix.Openat(dir, path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if permissionError(err) {
			s.deny(pc.pid)
			return false
		}
		return true // gone
	}
	f := os.NewFile(uintptr(fd), path)
	var wg sync.WaitGroup
	defer func() { wg.Wait(); _ = f.Close() }()
	var cut atomic.Bool
	for {
		names, err := f.Readdirnames(fdBatch)
		if len(names) > 0 {
			pc.fds.Add(int64(len(names)))
			s.descriptors.Add(int64(len(names)))
			batch := func() {
				if !s.stat(ctx, pc.pid, fd, names) {
					cut.Store(true)
				}
			}
			select {
			case s.slots <- struct{}{}:
				wg.Add(1)
				go func() { defer func() { <-s.slots; wg.Done() }(); batch() }()
			default:
				batch()
			}
		}
		if ctx.Err() != nil {
			return false
		}
		if errors.Is(err, io.EOF) || len(names) == 0 {
			break
		}
		if err != nil {
			return !permissionError(err) // gone meanwhile
		}
	}
	wg.Wait()
	return !cut.Load()
}

// stat stats the descriptors names of the table dir and takes the nodes
// they hold; false when it ran out of time first.
func (s *scan) stat(ctx context.Context, pid, dir int, names []string) bool {
	for i, n := range names {
		if i%256 == 0 && ctx.Err() != nil {
			return false
		}
		k, ok := fdKey(dir, n)
		if !ok {
			continue
		}
		if o, ok := s.keys[k]; ok {
			s.hold(pid, o, false)
		}
	}
	return true
}

// hold takes a process holding a node: open, or mapped only.
func (s *scan) hold(pid int, o nodeOwner, mapped bool) {
	if s.held(pid, o, mapped) {
		return
	}
	command := comm(s.proc, pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.heldLocked(pid, o, mapped) {
		return
	}
	s.out[o.card] = append(s.out[o.card], User{PID: pid, Command: command, Node: o.node, Mapped: mapped})
}

// held reports whether pid is already taken as holding o (a process
// holding a node through 1000 dups is read once), marking it as holding
// it open when it now is.
func (s *scan) held(pid int, o nodeOwner, mapped bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done || s.heldLocked(pid, o, mapped)
}

func (s *scan) heldLocked(pid int, o nodeOwner, mapped bool) bool {
	users := s.out[o.card]
	i := slices.IndexFunc(users, func(u User) bool { return u.PID == pid && u.Node == o.node })
	if i < 0 {
		return false
	}
	users[i].Mapped = users[i].Mapped && mapped // a descriptor says more than a mapping
	return true
}

func (s *scan) deny(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.denied, pid) {
		s.denied = append(s.denied, pid)
	}
}

// result is what the scan found and the notes on what it did not look
// at: unreached processes had not been started when time ran out.
func (s *scan) result(devRoot string, unreached int, took time.Duration) (map[int][]User, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var notes []string
	if len(s.denied) > 0 {
		slices.Sort(s.denied)
		notes = append(notes, deniedNote(s.proc, s.denied))
	}
	notes = append(notes, s.broken...)
	var unfinished []*procCount
	all := make([]*procCount, 0, len(s.procs))
	for _, pc := range s.procs {
		all = append(all, pc)
		if !pc.finished && !slices.Contains(s.denied, pc.pid) {
			unfinished = append(unfinished, pc)
		}
	}
	if unreached > 0 || len(unfinished) > 0 {
		notes = append(notes, s.timeoutNote(devRoot, all, unfinished, unreached, took))
	}
	for c := range s.out {
		slices.SortFunc(s.out[c], func(a, b User) int { return a.PID - b.PID })
	}
	return s.out, notes, nil
}

// timeoutNote says that the scan ran out of time, and names the
// processes with the most descriptors and their users: they are what
// made it long.
func (s *scan) timeoutNote(devRoot string, all, unfinished []*procCount, unreached int, took time.Duration) string {
	slices.SortFunc(all, func(a, b *procCount) int {
		if d := b.fds.Load() - a.fds.Load(); d != 0 {
			if d > 0 {
				return 1
			}
			return -1
		}
		return a.pid - b.pid
	})
	names := userNames(devRoot)
	var heavy []string
	for _, pc := range all[:min(len(all), heavyShown)] {
		h := fmt.Sprintf("pid %d", pc.pid)
		if c := comm(s.proc, pc.pid); c != "" {
			h += " (" + c + ")"
		}
		h += " of uid " + strconv.Itoa(pc.uid)
		if n, ok := names[pc.uid]; ok {
			h += " (" + n + ")"
		}
		h += fmt.Sprintf(": %d descriptors", pc.fds.Load())
		if !pc.finished {
			h += ", not finished"
		}
		heavy = append(heavy, h)
	}
	note := fmt.Sprintf("the scan of %s ran out of time (%s, after %d descriptors of %d processes): %d processes were not finished and %d not reached, and may hold a card",
		s.proc, took.Round(time.Millisecond), s.descriptors.Load(), len(all), len(unfinished), unreached)
	if len(heavy) > 0 {
		note += "; the processes with the most descriptors: " + strings.Join(heavy, "; ")
	}
	return note
}

// permissionError reports whether err says a process's files may not be
// read (another user's, without CAP_SYS_PTRACE).
func permissionError(err error) bool {
	return errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)
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
	return fmt.Sprintf("the descriptors of %d processes in %s could not be read (pid %s%s: permission denied; reading another user's /proc/PID/fd and maps takes CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH)",
		len(pids), proc, strings.Join(list, ", "), more)
}

// fdKey is the key of the file the descriptor link name of the table dir
// leads to, false for what is neither a character device nor a regular
// file. It never waits for a file system: the descriptor may be a file
// of a FUSE or NFS mount whose server hangs, and a plain stat(2) asks the
// server (FUSE GETATTR, an NFS revalidation) and waits for it without
// end. statx with AT_STATX_DONT_SYNC takes the attributes the kernel has,
// and asking only the type and inode spares NFS's flush of dirty pages
// before it answers a time (the device numbers come with every statx). A
// file system that ignores AT_STATX_DONT_SYNC can still block it
// (docs/security.md, "Partitions"); the scan's time bound then ends the
// wait for it.
//
// The statx is relative to the table's directory: a path through
// /proc/PID/fd would look up three more components per descriptor. It
// costs what a readlink of the descriptor costs (docs/benchmarks.md), so
// the link's text (socket:[N], pipe:[N]) is not read first.
func fdKey(dir int, name string) (nodeKey, bool) {
	var stx unix.Statx_t
	err := unix.Statx(dir, name, unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE|unix.STATX_INO, &stx)
	if errors.Is(err, unix.ENOSYS) {
		// A kernel before 4.11: stat(2), which may wait.
		var st unix.Stat_t
		if err := unix.Fstatat(dir, name, &st, 0); err != nil {
			return nodeKey{}, false
		}
		return statKey(st.Mode, uint64(st.Rdev), uint64(st.Dev), uint64(st.Ino)) //nolint:unconvert // 32-bit st_rdev, st_dev
	}
	if err != nil {
		return nodeKey{}, false
	}
	return statKey(uint32(stx.Mode), unix.Mkdev(stx.Rdev_major, stx.Rdev_minor), unix.Mkdev(stx.Dev_major, stx.Dev_minor), stx.Ino)
}

// statKey is the key of a file of mode with rdev, dev and ino.
func statKey(mode uint32, rdev, dev, ino uint64) (nodeKey, bool) {
	switch mode & unix.S_IFMT {
	case unix.S_IFCHR:
		return nodeKey{char: true, dev: rdev}, true
	case unix.S_IFREG:
		return nodeKey{dev: dev, ino: ino}, true
	}
	return nodeKey{}, false
}

// comm is a process's command name (/proc/PID/comm), "" when unreadable.
// The process chose it (PR_SET_NAME takes any bytes but NUL), so it is
// escaped (discover.CleanText): it is printed to the admin's terminal.
func comm(proc string, pid int) string {
	b, n := readProcText(filepath.Join(proc, strconv.Itoa(pid), "comm"), 64)
	return discover.CleanText(strings.TrimSpace(string(b[:n])))
}

// readProcText reads at most limit bytes of a procfs file: a regular file,
// opened without blocking or following a final link (a fake host's /proc
// is a tree anyone may have built), nothing when it cannot be read.
func readProcText(path string, limit int) ([]byte, int) {
	b := make([]byte, limit)
	fd, _, err := fdio.OpenRegularAt(unix.AT_FDCWD, path, path, unix.O_NOFOLLOW)
	if err != nil {
		return b, 0
	}
	defer func() { _ = unix.Close(fd) }()
	n, _ := fdio.ReadFullAt(fd, path, b, 0)
	return b, max(n, 0)
}
