package partition

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
)

// A process holding a card sets its command name (prctl PR_SET_NAME, any
// bytes but NUL) to terminal escapes: the admin running `partition show`
// or `apply` sees them escaped, never raw (discover.CleanText).
func TestProcessCommandEscaped(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	evil := "\x1b]0;owned\x07\x1b[2J\u202e"
	defer fakehosttest.HoldOpen(t, tr, 4242, 7, evil, "/dev/xpu2")()
	s, err := Show(context.Background(), config(tr))
	require.NoError(t, err)
	require.Len(t, s.Cards[0].InUse, 1)
	got := s.Cards[0].InUse[0]
	require.Equal(t, `\x1b]0;owned\a\x1b[2J\u202e`, got.Command)
	require.False(t, strings.ContainsAny(got.String(), "\x1b\x07\u202e"), got.String())
}

// A process with many descriptors holds none of the cards (a pod raising
// its RLIMIT_NOFILE, a proxy with many sockets): the scan looks at all
// of them, with no bound per process (it had one of 65536), and does not
// stand in the way. A process holding a card after its many descriptors
// is found.
func TestScanHasNoDescriptorBound(t *testing.T) {
	tr := fakehosttest.BuildOnTmpfs(t, fakehosttest.P800SRIOVBoth()) // 65636 links
	const many = 1<<16 + 100
	fakehosttest.HoldOpen(t, tr, 4242, many, "python3", "/dev/xpu1")
	for fd := range many {
		require.NoError(t, os.Symlink(tr.Path("/proc/devices"), tr.Path("/proc/4242/fd/"+strconv.Itoa(fd))))
	}
	s, err := Show(context.Background(), config(tr))
	require.NoError(t, err)
	require.Empty(t, s.Notes)
	require.Equal(t, []User{{PID: 4242, Command: "python3", Node: "/dev/xpu1"}}, s.Cards[0].InUse)
	require.Empty(t, s.Cards[1].InUse, "card 3 is not held")
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
	tr := build(t, fakehosttest.P800SRIOVBoth())
	defer fakehosttest.HoldOpen(t, tr, 4242, 7, "python3", "/dev/xpu1")()
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
