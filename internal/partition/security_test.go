package partition

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
)

// A process holding a card sets its command name (prctl PR_SET_NAME, any
// bytes but NUL) to terminal escapes: the admin running `partition show`
// or `apply` sees them escaped, never raw (discover.CleanText).
func TestProcessCommandEscaped(t *testing.T) {
	tr := build(t, p800SRIOV())
	evil := "\x1b]0;owned\x07\x1b[2J\u202e"
	defer holdOpen(t, tr, 4242, 7, evil, "/dev/xpu2")()
	s, err := Show(context.Background(), config(tr))
	require.NoError(t, err)
	require.Len(t, s.Cards[0].InUse, 1)
	got := s.Cards[0].InUse[0]
	require.Equal(t, `\x1b]0;owned\a\x1b[2J\u202e`, got.Command)
	require.False(t, strings.ContainsAny(got.String(), "\x1b\x07\u202e"), got.String())

	l, _ := ParseLayout("0=4")
	_, err = Apply(context.Background(), config(tr), l)
	require.ErrorIs(t, err, ErrInUse)
	require.False(t, strings.ContainsAny(err.Error(), "\x1b\x07\u202e"), err.Error())
}

// A process with many descriptors holds none of the cards (a pod raising
// its RLIMIT_NOFILE, a proxy with many sockets): the scan looks at all
// of them, with no bound per process (it had one of 65536), and does not
// stand in the way. A process holding a card after its many descriptors
// is found.
func TestScanHasNoDescriptorBound(t *testing.T) {
	tr := fakehosttest.BuildOnTmpfs(t, p800SRIOV()) // 65636 links
	const many = 1<<16 + 100
	holdOpen(t, tr, 4242, many, "python3", "/dev/xpu1")
	for fd := range many {
		require.NoError(t, os.Symlink(tr.Path("/proc/devices"), tr.Path("/proc/4242/fd/"+strconv.Itoa(fd))))
	}
	s, err := Show(context.Background(), config(tr))
	require.NoError(t, err)
	require.Empty(t, s.Notes)
	require.Equal(t, []User{{PID: 4242, Command: "python3", Node: "/dev/xpu1"}}, s.Cards[0].InUse)
	c := config(tr)
	c.DryRun = true
	_, err = Apply(context.Background(), c, Layout{{Selector: "3", VFs: 2}})
	require.NoError(t, err, "card 3 is not held")
}

// A scan that runs out of time (here: a process whose maps a read never
// ends, as a process can hold its memory lock, and a bound of 1s) must
// not let Apply re-lay-out a card: it refuses, naming the processes with
// the most descriptors and their users; Show only notes it. Only the
// admin's --ignore-incomplete-scan goes on, and never past a holder the
// scan found.
func TestApplyRefusesWhenTheScanIsIncomplete(t *testing.T) {
	tr := build(t, p800SRIOV())
	for fd := range 40 {
		holdOpen(t, tr, 4242, fd, "python3", "/proc/devices")
	}
	// A maps whose reader waits: a FIFO with a writer that writes nothing.
	require.NoError(t, unix.Mkfifo(tr.Path("/proc/4242/maps"), 0o644))
	w, err := os.OpenFile(tr.Path("/proc/4242/maps"), os.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	require.NoError(t, os.MkdirAll(tr.Path("/etc"), 0o755))
	require.NoError(t, os.WriteFile(tr.Path("/etc/passwd"), fmt.Appendf(nil, "root:x:0:0::/root:/bin/sh\nscanme:x:%d:0::/:/bin/sh\n", os.Geteuid()), 0o644))
	before := snapshot(t, tr)
	defer func(d time.Duration) { scanTimeout = d }(scanTimeout)
	scanTimeout = time.Second
	l, _ := ParseLayout("0=4")

	s, err := Show(context.Background(), config(tr))
	require.NoError(t, err)
	require.Len(t, s.Notes, 1)
	heavy := fmt.Sprintf("pid 4242 (python3) of uid %d (%s): 40 descriptors, not finished", os.Geteuid(), map[bool]string{true: "root", false: "scanme"}[os.Geteuid() == 0])
	require.Contains(t, s.Notes[0], "ran out of time")
	require.Contains(t, s.Notes[0], heavy)
	for _, dry := range []bool{true, false} {
		c := config(tr)
		c.DryRun = dry
		_, err = Apply(context.Background(), c, l)
		require.ErrorIs(t, err, ErrInUse, "dry run %v", dry)
		require.ErrorContains(t, err, "did not finish")
		require.ErrorContains(t, err, heavy)
		require.ErrorContains(t, err, "--ignore-incomplete-scan")
	}
	require.Equal(t, before, snapshot(t, tr))

	// The admin's override goes on; a holder found still refuses.
	c := config(tr)
	c.DryRun, c.IgnoreIncompleteScan = true, true
	_, err = Apply(context.Background(), c, l)
	require.NoError(t, err)
	holdOpen(t, tr, 4343, 3, "python3", "/dev/xpu1")
	_, err = Apply(context.Background(), c, l)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "is held by pid 4343 (python3)")

	// Out of time before the first process: every process is unreached.
	scanTimeout = 0
	c.IgnoreIncompleteScan = false
	_, err = Apply(context.Background(), c, l)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "0 processes were not finished and 2 not reached")
	// Nothing to change: nothing refused.
	_, err = Apply(context.Background(), c, Layout{{Selector: "0", VFs: 2}})
	require.NoError(t, err)
	require.Equal(t, before, snapshot(t, tr))
}

// withTimeout runs f and fails the test when it does not return within d
// (the unfixed code would hang the test binary instead).
func withTimeout(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %s", what, d)
	}
}

// A FIFO in place of a PF's SR-IOV attribute (a crafted tree, or a fake
// host) is refused at once: opened O_NONBLOCK, the open of a FIFO without
// a writer (reading) or a reader (writing) does not wait.
func TestSysfsAttributeFIFO(t *testing.T) {
	h := fakehost.R200SRIOV()
	h.Devices[0].NoNode = true
	tr := build(t, h)
	dir, err := filepath.EvalSymlinks(tr.Path("/sys/bus/pci/devices/0000:3b:00.0"))
	require.NoError(t, err)
	for _, name := range []string{"sriov_totalvfs", "sriov_numvfs"} {
		require.NoError(t, os.Remove(filepath.Join(dir, name)))
		require.NoError(t, unix.Mkfifo(filepath.Join(dir, name), 0o644))
	}
	// The PF has no node: show reads its sriov_totalvfs itself.
	withTimeout(t, 5*time.Second, "show", func() {
		s, err := Show(context.Background(), config(tr))
		require.NoError(t, err)
		require.Equal(t, 0, s.Cards[1].TotalVFs)
	})
	sys, err := openSysfs(tr.Root)
	require.NoError(t, err)
	defer sys.close()
	withTimeout(t, 5*time.Second, "readInt", func() {
		_, err := sys.readInt("0000:3b:00.0", attrNumVFs)
		require.ErrorContains(t, err, "not a regular file")
	})
	withTimeout(t, 5*time.Second, "writeNumVFs", func() {
		err := sys.writeNumVFs("0000:3b:00.0", 2)
		require.Error(t, err)
	})
}

// A PF's sriov_numvfs that is a hard link to another file (made by
// whoever can write the tree; a kernel attribute never has a second
// link) is refused: apply does not write the other file.
func TestSysfsAttributeHardLink(t *testing.T) {
	tr := build(t, p800SRIOV())
	p3 := numVFsPath(t, tr, "0000:83:00.0")
	precious := filepath.Join(filepath.Dir(tr.Root), "precious-"+filepath.Base(tr.Root))
	require.NoError(t, os.WriteFile(precious, []byte("0\n"), 0o644))
	t.Cleanup(func() { _ = os.Remove(precious) })
	require.NoError(t, os.Remove(p3))
	require.NoError(t, os.Link(precious, p3))
	st, err := os.Stat(precious)
	require.NoError(t, err)
	l, _ := ParseLayout("3=2")
	_, err = Apply(context.Background(), config(tr), l)
	require.ErrorContains(t, err, "hard link")
	data, err := os.ReadFile(precious)
	require.NoError(t, err)
	require.Equal(t, "0\n", string(data))
	after, err := os.Stat(precious)
	require.NoError(t, err)
	require.Equal(t, st.ModTime(), after.ModTime(), "not written (and put back)")
}

// The layout label is read strictly in its label form: the characters of
// a --layout (',', '=', ':', spaces) and a value no label can hold are
// refused, not read as a layout.
func TestParseLabelValueStrict(t *testing.T) {
	for _, bad := range []string{"all-2,3=4", "all=2", "all-2 ", " all-2", "all- 2", "0000:3b:00.0-4", "all-2\n", "all-+2", "all-02"} {
		_, err := ParseLabelValue(bad)
		require.Error(t, err, "%q", bad)
	}
	l, err := ParseLabelValue("all-2_0000.3b.00.0-4")
	require.NoError(t, err)
	require.Equal(t, "all=2,0000:3b:00.0=4", l.String())
}

// onThreadWithoutDAC runs f on a thread of its own without
// CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH in its effective set, as in the
// chart's installer, which drops every capability (capabilities are per
// thread; the thread is not reused: it exits with the goroutine, locked).
func onThreadWithoutDAC(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if os.Geteuid() == 0 {
			hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
			var data [2]unix.CapUserData
			if err := unix.Capget(&hdr, &data[0]); err != nil {
				t.Error(err)
				return
			}
			data[0].Effective &^= 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH
			if err := unix.Capset(&hdr, &data[0]); err != nil {
				t.Error(err)
				return
			}
		}
		f()
	}()
	<-done
}

// A process whose descriptors may not be read (another user's, by a root
// without CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH: the chart's installer
// drops every capability) may hold a card: the scan says it could not
// look, which makes Apply refuse, instead of skipping it as gone.
func TestScanDeniedProcessIsIncomplete(t *testing.T) {
	tr := build(t, p800SRIOV())
	defer holdOpen(t, tr, 4242, 7, "python3", "/dev/xpu1")()
	require.NoError(t, os.Chmod(tr.Path("/proc/4242/fd"), 0))
	h := discoverTree(t, tr)
	cards := Cards(h)
	var notes []string
	var err error
	defer func(n int) { scanWorkers = n }(scanWorkers)
	scanWorkers = 1 // capabilities are per thread: the scan stays on this one
	onThreadWithoutDAC(t, func() {
		_, notes, err = scanProcesses(context.Background(), tr.Root, nodeKeys(h, cards))
	})
	require.NoError(t, err)
	require.Len(t, notes, 1)
	require.Contains(t, notes[0], "the descriptors of 1 processes in "+tr.Path("/proc")+" could not be read (pid 4242: permission denied")
	require.NoError(t, os.Chmod(tr.Path("/proc/4242/fd"), 0o755))
}
