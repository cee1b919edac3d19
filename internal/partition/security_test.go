package partition

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

// A process holding a card that the bounded scan does not reach (here: a
// process with more descriptors than the per-process bound, as a pod
// raising its RLIMIT_NOFILE can have, and a scan out of time) must not
// let Apply re-lay-out the card: an incomplete scan refuses, naming what
// was not checked; Show only notes it.
func TestApplyRefusesWhenTheScanIsIncomplete(t *testing.T) {
	tr := build(t, p800SRIOV())
	release := holdOpen(t, tr, 4242, 7, "python3", "/dev/xpu1")
	for fd := 10; fd < 16; fd++ {
		require.NoError(t, os.Symlink(tr.Path("/proc/devices"), tr.Path("/proc/4242/fd/"+strconv.Itoa(fd))))
	}
	before := snapshot(t, tr)
	defer func(v int, d time.Duration) { maxFDsPID, scanTimeout = v, d }(maxFDsPID, scanTimeout)
	maxFDsPID = 4
	l, _ := ParseLayout("0=4")

	s, err := Show(context.Background(), config(tr))
	require.NoError(t, err)
	require.Len(t, s.Notes, 1)
	require.Contains(t, s.Notes[0], "holds more than 4 descriptors")
	for _, dry := range []bool{true, false} {
		c := config(tr)
		c.DryRun = dry
		_, err = Apply(context.Background(), c, l)
		require.ErrorIs(t, err, ErrInUse, "dry run %v", dry)
		require.ErrorContains(t, err, "did not finish")
		require.ErrorContains(t, err, "/proc/4242/fd holds more than 4 descriptors")
	}
	require.Equal(t, before, snapshot(t, tr))

	// Out of time before the first process (one holding nothing).
	release()
	defer holdOpen(t, tr, 77, 3, "sleep", "/proc/devices")()
	maxFDsPID, scanTimeout = 1<<16, 0
	c := config(tr)
	c.DryRun = true
	_, err = Apply(context.Background(), c, l)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "processes after it were not checked")
	// Nothing to change: nothing refused.
	_, err = Apply(context.Background(), c, Layout{{Selector: "0", VFs: 2}})
	require.NoError(t, err)
	require.Equal(t, before, snapshot(t, tr))
}
