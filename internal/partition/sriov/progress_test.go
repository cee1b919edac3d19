package sriov

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
)

// progressLines collects what Apply reports through Config.Progress.
type progressLines struct {
	mu    sync.Mutex
	lines []string
}

func (p *progressLines) add(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, line)
}

func (p *progressLines) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// count is how many lines contain s.
func (p *progressLines) count(s string) int {
	n := 0
	for _, l := range p.all() {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// Each write is a progress line naming the card and the values, the wait
// for the kernel after it a line when it starts, lines while it lasts,
// and its end; a rollback's writes too.
func TestApplyProgressWhenTheKernelDoesNotFollow(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	require.NoError(t, os.Chmod(fakehosttest.NumVFsPath(t, tr, "0000:03:00.0"), 0o644))
	var p progressLines
	c := config(tr)
	c.Settle, c.progressEvery, c.Progress = 700*time.Millisecond, 200*time.Millisecond, p.add
	_, err := apply(t, c, "0=4")
	require.Error(t, err)
	lines := p.all()
	const card = "card 0 (0000:03:00.0): "
	require.Equal(t, card+"sriov_numvfs 2 -> 0", lines[0])
	require.Equal(t, card+"waiting for the kernel and udev to show 0 VFs (at most 700ms)", lines[1])
	require.GreaterOrEqual(t, p.count(card+"still waiting for 0 VFs after "), 2, lines)
	require.Equal(t, 1, p.count(card+"gave up waiting for 0 VFs after 7"), lines)
	require.Contains(t, lines, card+"sriov_numvfs 0 -> 2", "the rollback's write")
	require.Equal(t, 2, p.count(card+"sriov_numvfs "), lines)
}

// --wait says once that it waits and for what, then only what changed,
// and how long it waited in all.
func TestApplyWaitSaysOnceThenChanges(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	release := fakehosttest.HoldOpen(t, tr, 4242, 7, "python3", "/dev/xpu1")
	var p progressLines
	c := config(tr)
	c.DryRun, c.Wait, c.Progress = true, 20*time.Second, p.add
	go func() {
		time.Sleep(2500 * time.Millisecond)
		release2 := fakehosttest.HoldOpen(t, tr, 4243, 3, "xpu-smi", "/dev/xpu2")
		release()
		time.Sleep(2500 * time.Millisecond)
		release2()
	}()
	_, err := apply(t, c, "0=4")
	require.NoError(t, err)
	lines := p.all()
	require.Len(t, lines, 3, lines)
	require.Regexp(t, `^waiting up to 20s for the cards to change to be free \(checking every 1s\): card 0 \(0000:03:00.0\) is held by pid 4242 \(python3\) holding /dev/xpu1$`, lines[0])
	require.Regexp(t, `^after [0-9.]+s: card 0 \(0000:03:00.0\) is held by pid 4243 \(xpu-smi\) holding /dev/xpu2$`, lines[1])
	require.Regexp(t, `^the cards to change are free after [0-9.]+s$`, lines[2])
}

// A process that may not write sriov_numvfs is told so before anything
// is tried: the file, who owns it, what it takes; nothing is written, not
// even with a card in use that --wait would wait for. The credentials
// are injected (the tree's files are the test user's own), so that the
// test holds as root and as any other user.
func TestApplyNotPermittedUpFront(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	p0 := fakehosttest.NumVFsPath(t, tr, "0000:03:00.0")
	require.NoError(t, os.Chmod(p0, 0o644))
	require.NoError(t, os.Chmod(fakehosttest.NumVFsPath(t, tr, "0000:83:00.0"), 0o644))
	var st unix.Stat_t
	require.NoError(t, unix.Stat(p0, &st))
	defer fakehosttest.HoldOpen(t, tr, 4242, 7, "python3", "/dev/xpu1")()
	before := fakehosttest.Snapshot(t, tr)
	other := writerCreds{uid: st.Uid + 1, gids: []uint32{st.Gid + 1}}
	c := config(tr)
	c.Wait = 10 * time.Second
	c.hooks = &applyHooks{creds: func() (writerCreds, error) { return other, nil }}
	start := time.Now()
	rep, err := apply(t, c, "0=4,3=2")
	require.Less(t, time.Since(start), 5*time.Second, "refused before the wait")
	require.ErrorIs(t, err, ErrNotPermitted)
	require.ErrorContains(t, err, "card 0 (0000:03:00.0): "+tr.Path("/sys/bus/pci/devices/0000:03:00.0/sriov_numvfs")+": it is owned by uid ")
	require.ErrorContains(t, err, "mode 0644, and this process runs as uid ")
	require.ErrorContains(t, err, "takes root")
	require.NotErrorIs(t, err, ErrInUse)
	require.True(t, rep.Refused)
	require.Equal(t, "0=2,3=0", rep.After, "the node as it is")
	require.Equal(t, before, fakehosttest.Snapshot(t, tr))

	// A dry run says it in a note and reports the plan.
	c.DryRun = true
	c.Wait = 0
	rep, err = apply(t, c, "3=2")
	require.NoError(t, err)
	require.Equal(t, "all=2", rep.After)
	require.Len(t, rep.Notes, 1)
	require.Contains(t, rep.Notes[0], "this process could not apply the layout: "+ErrNotPermitted.Error())

	// The owner, a member of the file's group with the group's write
	// bit, CAP_DAC_OVERRIDE: permitted.
	for _, cr := range []writerCreds{
		{uid: st.Uid},
		{uid: st.Uid + 1, dacOverride: true},
	} {
		c.hooks = &applyHooks{creds: func() (writerCreds, error) { return cr, nil }}
		rep, err = apply(t, c, "3=2")
		require.NoError(t, err)
		require.Empty(t, rep.Notes, cr)
	}
	require.Empty(t, whyNotWritable(&unix.Stat_t{Uid: 1, Gid: 7, Mode: unix.S_IFREG | 0o664}, false, writerCreds{uid: 2, gids: []uint32{7}}))
	require.NotEmpty(t, whyNotWritable(&unix.Stat_t{Uid: 1, Gid: 7, Mode: unix.S_IFREG | 0o644}, false, writerCreds{uid: 2, gids: []uint32{7}}))
	require.Contains(t, whyNotWritable(&unix.Stat_t{Uid: 1, Mode: unix.S_IFREG | 0o666}, true, writerCreds{uid: 1, dacOverride: true}), "read-only")
}

// The process's own credentials: a file it may not write (mode 0444, or
// root's 0644 for another user) is refused up front unless the process
// has CAP_DAC_OVERRIDE (root), as the kernel would decide.
func TestApplyNotPermittedProcessCreds(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	require.NoError(t, os.Chmod(fakehosttest.NumVFsPath(t, tr, "0000:83:00.0"), 0o444))
	cr, err := processCreds()
	require.NoError(t, err)
	c := config(tr)
	c.DryRun = true
	rep, err := apply(t, c, "3=2")
	require.NoError(t, err)
	if cr.dacOverride {
		require.Empty(t, rep.Notes, "root writes any mode")
		return
	}
	require.Len(t, rep.Notes, 1)
	require.Contains(t, rep.Notes[0], tr.Path("/sys/bus/pci/devices/0000:83:00.0/sriov_numvfs")+": it is owned by uid ")
	c.DryRun = false
	_, err = apply(t, c, "3=2")
	require.ErrorIs(t, err, ErrNotPermitted)
}

// Against the fake kernel with a slow udev: each write, the wait for its
// VF nodes (start, while it lasts, total) and the card done.
func TestFakeKernelProgress(t *testing.T) {
	tr, k := withKernel(t, fakehost.P800SRIOV(), fakehost.SRIOVOptions{SlowUdevDelay: 1200 * time.Millisecond})
	const pf = "0000:03:00.0"
	var p progressLines
	c := config(tr)
	c.Settle, c.progressEvery, c.Progress = 10*time.Second, 400*time.Millisecond, p.add
	k.FailNext(pf, fakehost.FaultSlowUdev)
	_, err := apply(t, c, "0=4")
	require.NoError(t, err)
	lines := p.all()
	const card = "card 0 (0000:03:00.0): "
	require.Equal(t, card+"sriov_numvfs 2 -> 0", lines[0])
	require.Equal(t, card+"waiting for the kernel and udev to show 0 VFs (at most 10s)", lines[1])
	require.GreaterOrEqual(t, p.count(card+"still waiting for 0 VFs after "), 1, lines)
	require.Regexp(t, `^`+regexp.QuoteMeta(card)+`the kernel and udev show 0 VFs after 1\.[0-9]+s$`, lines[slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "show 0 VFs after") })])
	require.Contains(t, lines, card+"sriov_numvfs 0 -> 4")
	require.Equal(t, card+"2 VFs -> 4 VFs, done", lines[len(lines)-1])
}
