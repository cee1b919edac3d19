package partition

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// The test binary re-executes itself as a process holding a node in one
// of the ways the in-use scan must see (holderEnv says which, holderNode
// the node's host path). It writes "ready" once it holds the node and
// exits when its stdin closes.
const (
	holderEnv  = "XPU_CDI_TEST_HOLDER"
	holderNode = "XPU_CDI_TEST_HOLDER_NODE"
)

// The ways of holding a node.
const (
	// holdThread: a thread that unshared its descriptor table
	// (unshare(CLONE_FILES)) opens the node; the leader's table, which
	// /proc/PID/fd shows, does not have it.
	holdThread = "thread"
	// holdDeadLeader: the node is open in the process's table, and the
	// leader thread exits alone (exit(2), not exit_group): a zombie
	// leader, whose /proc/PID/fd is empty, with live threads.
	holdDeadLeader = "dead-leader"
	// holdMapping: the node is mapped MAP_SHARED and its descriptor
	// closed.
	holdMapping = "mapping"
	// holdPrivateMapping: the same with MAP_PRIVATE (a mapping of
	// /dev/zero's driver keeps its file only when private).
	holdPrivateMapping = "private-mapping"
	// holdMany: no card, but as many descriptors as holderCount says
	// (at most its RLIMIT_NOFILE): half of them sockets and pipes, half
	// dups of the plain file holderNode names.
	holdMany = "many"
)

// holderCount is the descriptors of holdMany.
const holderCount = "XPU_CDI_TEST_HOLDER_COUNT"

func init() {
	if os.Getenv(holderEnv) != "" {
		// The main goroutine stays on the leader thread (which exits, for
		// holdDeadLeader): no other goroutine runs on it.
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(holderEnv); mode != "" {
		os.Exit(runHolder(mode, os.Getenv(holderNode)))
	}
	os.Exit(m.Run())
}

// runHolder is the holder process.
func runHolder(mode, node string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "holder:", err); return 1 }
	ready := func() { fmt.Println("ready") }
	waitStdin := func() { _, _ = io.Copy(io.Discard, os.Stdin); os.Exit(0) }
	switch mode {
	case holdThread:
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the process
			if err := unix.Unshare(unix.CLONE_FILES); err != nil {
				errc <- err
				return
			}
			if _, err := unix.Open(node, unix.O_PATH|unix.O_CLOEXEC, 0); err != nil {
				errc <- err
				return
			}
			errc <- nil
			select {}
		}()
		if err := <-errc; err != nil {
			return fail(err)
		}
		ready()
		waitStdin()
	case holdDeadLeader:
		if _, err := unix.Open(node, unix.O_PATH|unix.O_CLOEXEC, 0); err != nil {
			return fail(err)
		}
		go waitStdin()
		ready()
		// The leader thread alone exits; the others keep the process.
		_, _, _ = unix.RawSyscall(unix.SYS_EXIT, 0, 0, 0)
	case holdMany:
		if err := holdManyDescriptors(node, os.Getenv(holderCount)); err != nil {
			return fail(err)
		}
		ready()
		waitStdin()
	case holdMapping, holdPrivateMapping:
		fd, err := unix.Open(node, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(err)
		}
		flags := unix.MAP_SHARED
		if mode == holdPrivateMapping {
			flags = unix.MAP_PRIVATE
		}
		if _, err := unix.Mmap(fd, 0, os.Getpagesize(), unix.PROT_READ, flags); err != nil {
			return fail(err)
		}
		if err := unix.Close(fd); err != nil {
			return fail(err)
		}
		ready()
		waitStdin()
	}
	return fail(fmt.Errorf("unknown mode %q", mode))
}

// holdManyDescriptors opens count descriptors: a quarter socket pairs, a
// quarter pipes (two descriptors each), half dups of the file at path.
func holdManyDescriptors(path, count string) error {
	n, err := strconv.Atoi(count)
	if err != nil {
		return err
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	lim.Cur = lim.Max
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	for range n / 8 {
		if _, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return err
		}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	for range n/2 - 1 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0); err != nil {
			return err
		}
	}
	return nil
}

// startHolder starts the holder process (mode) holding the tree's node
// (an in-tree path) and makes it a process of the tree's /proc: the
// tree's proc/PID links to the real /proc/PID. It returns the pid; the
// process is ended with the test.
func startHolder(t testing.TB, tr *fakehost.Tree, mode, node string, env ...string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), holderEnv+"="+mode, holderNode+"="+tr.Path(node)), env...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the holder (%s) did not start", mode)
	require.Equal(t, "ready\n", line)
	pid := cmd.Process.Pid
	require.NoError(t, os.Symlink("/proc/"+strconv.Itoa(pid), tr.Path("/proc/"+strconv.Itoa(pid))))
	return pid
}

// fdTablesHold reports whether the leader's table (/proc/PID/fd) and any
// thread's table hold a descriptor of the file at path.
func fdTablesHold(t *testing.T, pid int, path string) (leader, anyThread bool) {
	t.Helper()
	var want unix.Stat_t
	require.NoError(t, unix.Stat(path, &want))
	holds := func(dir string) bool {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			var st unix.Stat_t
			if unix.Stat(filepath.Join(dir, e.Name()), &st) == nil && st.Dev == want.Dev && st.Ino == want.Ino {
				return true
			}
		}
		return false
	}
	leader = holds(fmt.Sprintf("/proc/%d/fd", pid))
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	require.NoError(t, err)
	for _, task := range tasks {
		anyThread = anyThread || holds(fmt.Sprintf("/proc/%d/task/%s/fd", pid, task.Name()))
	}
	return leader, anyThread
}

// requireHeld checks that show names pid as a user of card 0 (through
// node, mapped or not), and so does the check of the holders the writer
// makes before it changes card 0 (package sriov refuses a card with a
// holder: its tests), writing nothing.
func requireHeld(t *testing.T, tr *fakehost.Tree, pid int, node string, mapped bool) {
	t.Helper()
	before := fakehosttest.Snapshot(t, tr)
	s, err := Show(context.Background(), config(tr))
	require.NoError(t, err)
	require.Empty(t, s.Notes)
	require.Contains(t, s.Cards[0].InUse, User{PID: pid, Command: strings.TrimSpace(readFile(t, fmt.Sprintf("/proc/%d/comm", pid))), Node: node, Mapped: mapped})
	// What the writer (package sriov) asks before it changes card 0: the
	// plan, then the holders of the cards planned.
	l, _ := ParseLayout("0=4")
	c := config(tr)
	h, cards, changes, err := c.WithDefaults().Plan(l)
	require.NoError(t, err)
	require.NotEqual(t, changes[0].From, changes[0].To)
	_, partial, err := FindUsers(context.Background(), c.WithDefaults(), h, cards)
	require.NoError(t, err)
	require.False(t, partial)
	require.Contains(t, cards[0].InUse, User{PID: pid, Command: strings.TrimSpace(readFile(t, fmt.Sprintf("/proc/%d/comm", pid))), Node: node, Mapped: mapped})
	require.Equal(t, before, fakehosttest.Snapshot(t, tr))
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// A thread that unshared its descriptor table (unshare(CLONE_FILES))
// holds a card: /proc/PID/fd, the leader's table, does not show it, the
// thread's /proc/PID/task/TID/fd does. Apply must refuse the card.
func TestScanSeesAThreadsOwnTable(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	pid := startHolder(t, tr, holdThread, "/dev/xpu1")
	leader, thread := fdTablesHold(t, pid, tr.Path("/dev/xpu1"))
	require.False(t, leader, "the leader's table must not hold the node")
	require.True(t, thread, "a thread's table holds the node")
	requireHeld(t, tr, pid, "/dev/xpu1", false)

	// Through the machine's own /proc, where kcmp proves which threads
	// share their leader's table (reading init's namespace takes root):
	// the thread's own table is still scanned.
	if os.Geteuid() != 0 {
		return
	}
	require.True(t, procIsOurs("/proc"))
	h := discoverTree(t, tr)
	out, _, err := scanProcesses(context.Background(), "/", nodeKeys(h, Cards(h)))
	require.NoError(t, err)
	require.Contains(t, out[0], User{PID: pid, Command: strings.TrimSpace(readFile(t, fmt.Sprintf("/proc/%d/comm", pid))), Node: "/dev/xpu1"})
}

// kcmp tells the threads that share the leader's table from the one
// with a table of its own (the holder's thread that unshared it).
func TestSameFiles(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	pid := startHolder(t, tr, holdThread, "/dev/xpu1")
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	require.NoError(t, err)
	var own, shared int
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		require.NoError(t, err)
		if tid == pid {
			continue
		}
		if sameFiles(pid, tid) {
			shared++
		} else {
			own++
		}
	}
	require.Equal(t, 1, own, "one thread unshared its table")
	require.Positive(t, shared, "the Go runtime's other threads share the leader's")
}

// The leader thread of a process holding a card exits alone: a zombie
// leader, whose /proc/PID/fd is empty, while its threads run on and hold
// the card. Apply must refuse it.
func TestScanSeesTheThreadsOfADeadLeader(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	pid := startHolder(t, tr, holdDeadLeader, "/dev/xpu1")
	testutil.Eventually(t, func(t testing.TB) bool {
		return strings.Contains(readFile(t, fmt.Sprintf("/proc/%d/status", pid)), "State:\tZ")
	}, 5*time.Second, 10*time.Millisecond, "the leader must be a zombie")
	leader, thread := fdTablesHold(t, pid, tr.Path("/dev/xpu1"))
	require.False(t, leader, "a zombie leader's table is empty")
	require.True(t, thread, "the threads' table holds the node")
	requireHeld(t, tr, pid, "/dev/xpu1", false)
}

// A process maps a card's node MAP_SHARED and closes the descriptor: it
// holds the card through the mapping alone. Apply must refuse it. The
// node is a plain file here (as on a fake host without mknod, root or
// not); TestScanSeesAMappedCharNode maps a real character device.
func TestScanSeesAMappingWithoutDescriptor(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth(), fakehost.WithoutMknod())
	pid := startHolder(t, tr, holdMapping, "/dev/xpu1")
	leader, thread := fdTablesHold(t, pid, tr.Path("/dev/xpu1"))
	require.False(t, leader || thread, "no descriptor holds the node")
	require.Contains(t, readFile(t, fmt.Sprintf("/proc/%d/maps", pid)), tr.Path("/dev/xpu1"))
	requireHeld(t, tr, pid, "/dev/xpu1", true)
}

// TestScanSeesAMappingWithoutDescriptor with a real character device:
// the fake host's node of /dev/xpu1 is a node of /dev/zero's numbers
// (1:5; the xpu driver's major has no driver here), mapped MAP_PRIVATE
// (a shared mapping of /dev/zero is re-pointed to an anonymous file) and
// its descriptor closed. The mapping names the node's identity in maps,
// and map_files leads to the device's numbers.
func TestScanSeesAMappedCharNode(t *testing.T) {
	testreq.Root(t, "mknod of a character device the test can map")
	h := fakehosttest.P800SRIOVBoth()
	h.Major = 1
	for i := range h.Devices {
		if h.Devices[i].Index == 1 {
			h.Devices[i].Minor = 5
		}
	}
	tr := build(t, h)
	require.True(t, tr.RealNodes)
	pid := startHolder(t, tr, holdPrivateMapping, "/dev/xpu1")
	requireHeld(t, tr, pid, "/dev/xpu1", true)

	// Without the node's identity (another node of the same device, as
	// a container's runtime makes one), map_files tells the device.
	h2 := discoverTree(t, tr)
	keys := nodeKeys(h2, Cards(h2))
	for k := range keys {
		if !k.char {
			delete(keys, k)
		}
	}
	require.Contains(t, keys, nodeKey{char: true, dev: unix.Mkdev(1, 5)})
	out, notes, err := scanProcesses(context.Background(), tr.Root, keys)
	require.NoError(t, err)
	require.Empty(t, notes)
	require.Contains(t, out[0], User{PID: pid, Command: strings.TrimSpace(readFile(t, fmt.Sprintf("/proc/%d/comm", pid))), Node: "/dev/xpu1", Mapped: true})
}
