package partition_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/partition/sriov"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// A scan that runs out of time (here: a process whose maps a read never
// ends, as a process can hold its memory lock, and a bound of 1s) must
// not let Apply re-lay-out a card: it refuses, naming the processes with
// the most descriptors and their users; Show only notes it. Only the
// admin's --ignore-incomplete-scan goes on, and never past a holder the
// scan found.
func TestApplyRefusesWhenTheScanIsIncomplete(t *testing.T) {
	tr := fakehosttest.Build(t, fakehosttest.P800SRIOVBoth())
	for fd := range 40 {
		fakehosttest.HoldOpen(t, tr, 4242, fd, "python3", "/proc/devices")
	}
	// A maps whose reader waits: a FIFO with a writer that writes nothing.
	require.NoError(t, unix.Mkfifo(tr.Path("/proc/4242/maps"), 0o644))
	w, err := os.OpenFile(tr.Path("/proc/4242/maps"), os.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	require.NoError(t, os.MkdirAll(tr.Path("/etc"), 0o755))
	require.NoError(t, os.WriteFile(tr.Path("/etc/passwd"), fmt.Appendf(nil, "root:x:0:0::/root:/bin/sh\nscanme:x:%d:0::/:/bin/sh\n", os.Geteuid()), 0o644))
	before := fakehosttest.Snapshot(t, tr)
	partition.SetScanTimeout(t, time.Second)
	l, _ := partition.ParseLayout("0=4")

	s, err := partition.Show(context.Background(), writerConfig(tr).Config)
	require.NoError(t, err)
	require.Len(t, s.Notes, 1)
	heavy := fmt.Sprintf("pid 4242 (python3) of uid %d (%s): 40 descriptors, not finished", os.Geteuid(), map[bool]string{true: "root", false: "scanme"}[os.Geteuid() == 0])
	require.Contains(t, s.Notes[0], "ran out of time")
	require.Contains(t, s.Notes[0], heavy)
	for _, dry := range []bool{true, false} {
		c := writerConfig(tr)
		c.DryRun = dry
		_, err = sriov.Apply(context.Background(), c, l)
		require.ErrorIs(t, err, sriov.ErrInUse, "dry run %v", dry)
		require.ErrorContains(t, err, "did not finish")
		require.ErrorContains(t, err, heavy)
		require.ErrorContains(t, err, "--ignore-incomplete-scan")
	}
	require.Equal(t, before, fakehosttest.Snapshot(t, tr))

	// The admin's override goes on; a holder found still refuses.
	c := writerConfig(tr)
	c.DryRun, c.IgnoreIncompleteScan = true, true
	_, err = sriov.Apply(context.Background(), c, l)
	require.NoError(t, err)
	fakehosttest.HoldOpen(t, tr, 4343, 3, "python3", "/dev/xpu1")
	_, err = sriov.Apply(context.Background(), c, l)
	require.ErrorIs(t, err, sriov.ErrInUse)
	require.ErrorContains(t, err, "is held by pid 4343 (python3)")

	// Out of time before the first process: every process is unreached.
	partition.SetScanTimeout(t, 0)
	c.IgnoreIncompleteScan = false
	_, err = sriov.Apply(context.Background(), c, l)
	require.ErrorIs(t, err, sriov.ErrInUse)
	require.ErrorContains(t, err, "0 processes were not finished and 2 not reached")
	// Nothing to change: nothing refused.
	_, err = sriov.Apply(context.Background(), c, partition.Layout{{Selector: "0", VFs: 2}})
	require.NoError(t, err)
	require.Equal(t, before, fakehosttest.Snapshot(t, tr))
}

// writerConfig is the writer's Config of a fake tree, with short waits.
func writerConfig(tr *fakehost.Tree) sriov.Config {
	c := sriov.Config{Config: partition.Config{DevRoot: tr.Root, DriverRoot: tr.Root}, Settle: 300 * time.Millisecond}
	if !tr.RealNodes {
		c.DiscoverOptions = []discover.Option{discover.WithNodeStater(tr.NodeStater())}
	}
	return c
}
