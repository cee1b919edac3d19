package sriov

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// The tests of this file run Apply against the fake SR-IOV kernel
// (fakehost.StartSRIOV: FUSE, root), which answers sriov_numvfs writes as
// the kernel and the driver do and creates the VF nodes after a udev delay.

// withKernel builds h and starts the fake kernel on it.
func withKernel(t *testing.T, h fakehost.Host, opts fakehost.SRIOVOptions) (*fakehost.Tree, *fakehost.SRIOVKernel) {
	t.Helper()
	tr := fakehosttest.Build(t, h)
	return tr, fakehosttest.StartSRIOV(t, tr, opts)
}

// writes are the values written to pf's sriov_numvfs since the first n
// writes, with their result ("0", "4", "2:EIO").
func writes(k *fakehost.SRIOVKernel, pf string, from int) []string {
	var out []string
	for _, w := range k.Writes()[from:] {
		if w.PF != pf {
			continue
		}
		v := w.Value
		if w.Errno != 0 {
			v += ":" + w.Errno.Error()
		}
		out = append(out, v)
	}
	return out
}

func apply(t *testing.T, c Config, layout string) (*Report, error) {
	t.Helper()
	l, err := partition.ParseLayout(layout)
	require.NoError(t, err)
	return Apply(context.Background(), c, l)
}

// cardOf returns the card at addr of a fresh discovery.
func cardOf(t *testing.T, c Config, addr string) partition.Card {
	t.Helper()
	h, err := c.withDefaults().Discover()
	require.NoError(t, err)
	for _, card := range partition.Cards(h) {
		if card.Address == addr {
			return card
		}
	}
	t.Fatalf("no card %s", addr)
	return partition.Card{}
}

func TestFakeKernelApplyP800(t *testing.T) {
	tr, k := withKernel(t, fakehost.P800SRIOV(), fakehost.SRIOVOptions{})
	const pf = "0000:83:00.0"
	c := config(tr)
	c.Settle = 10 * time.Second
	var hosts []*discover.Host
	c.AfterApply = func(h *discover.Host) error { hosts = append(hosts, h); return nil }

	for _, step := range []struct {
		layout string
		writes []string
		vfs    int
		size   int64
	}{
		{"3=2", []string{"2"}, 2, 49152},
		{"3=4", []string{"0", "4"}, 4, 24576},
		{"3=0", []string{"0"}, 0, 0},
	} {
		n := len(k.Writes())
		rep, err := apply(t, c, step.layout)
		require.NoError(t, err, step.layout)
		require.Equal(t, step.writes, writes(k, pf, n), "%s: 0 first when the card has VFs, then the count", step.layout)
		require.Equal(t, step.vfs, k.NumVFs(pf))
		card := cardOf(t, c, pf)
		require.Equal(t, step.vfs, card.NumVFs)
		require.Len(t, card.VFs, step.vfs, "every VF with its node once Apply returns")
		require.Equal(t, step.size, card.VFMemoryMiB)
		require.Equal(t, 2, k.NumVFs("0000:03:00.0"), "the other card is not touched")
		require.True(t, rep.Changed())

		// Idempotent: the same layout again writes nothing.
		n = len(k.Writes())
		rep, err = apply(t, c, step.layout)
		require.NoError(t, err)
		require.False(t, rep.Changed())
		require.Len(t, k.Writes(), n)
	}
	require.Len(t, hosts, 3, "AfterApply once per change, not for the no-op applies")
	require.Equal(t, "all=2", partition.Current(hosts[0]).String())
	require.Equal(t, "0=2,3=4", partition.Current(hosts[1]).String())

	// Both cards at once: each card's writes in order, one card after the other.
	n := len(k.Writes())
	_, err := apply(t, c, "all=4")
	require.NoError(t, err)
	require.Equal(t, []string{"0", "4"}, writes(k, "0000:03:00.0", n))
	require.Equal(t, []string{"4"}, writes(k, pf, n))
	all := k.Writes()[n:]
	require.Equal(t, "0000:03:00.0", all[0].PF)
	require.Equal(t, pf, all[len(all)-1].PF)
}

// A write the driver fails: the card keeps its count, nothing after it is
// written.
func TestFakeKernelWriteErrorRollsBack(t *testing.T) {
	tr, k := withKernel(t, fakehost.P800SRIOV(), fakehost.SRIOVOptions{})
	c := config(tr)
	c.Settle = 5 * time.Second
	c.AfterApply = func(*discover.Host) error { t.Error("AfterApply after a failure"); return nil }
	k.FailNext("0000:03:00.0", fakehost.FaultWriteError)
	n := len(k.Writes())
	rep, err := apply(t, c, "0=4,3=2")
	require.ErrorContains(t, err, "card 0 (0000:03:00.0): write 0 to")
	require.ErrorContains(t, err, "put back to 2 VFs")
	require.Equal(t, []string{"0:input/output error"}, writes(k, "0000:03:00.0", n))
	require.Empty(t, writes(k, "0000:83:00.0", n), "the cards after a failure are not touched")
	require.True(t, rep.Cards[0].RolledBack)
	require.Equal(t, 2, rep.Cards[0].After)
	require.Equal(t, 2, k.NumVFs("0000:03:00.0"))
	require.Equal(t, 0, k.NumVFs("0000:83:00.0"))
}

// Udev never creates the new VFs' nodes: Apply gives up after Settle and
// puts the card back to its count (0, then the old count again).
func TestFakeKernelNodesNeverAppearRollsBack(t *testing.T) {
	tr, k := withKernel(t, fakehost.P800SRIOV(), fakehost.SRIOVOptions{})
	const pf = "0000:03:00.0"
	c := config(tr)
	c.Settle = 1500 * time.Millisecond
	k.FailNext(pf, fakehost.FaultNoNodes)
	n := len(k.Writes())
	rep, err := apply(t, c, "0=4")
	require.ErrorContains(t, err, "the kernel did not show 4 VFs within 1.5s")
	require.ErrorContains(t, err, "udev not done?")
	require.ErrorContains(t, err, "put back to 2 VFs")
	require.Equal(t, []string{"0", "4", "0", "2"}, writes(k, pf, n))
	require.Equal(t, []int{0, 4, 0, 2}, rep.Cards[0].Writes)
	require.True(t, rep.Cards[0].RolledBack)
	card := cardOf(t, c, pf)
	require.Equal(t, 2, card.NumVFs)
	require.Len(t, card.VFs, 2)
	require.Equal(t, "0=2,3=0", rep.After)
}

// Udev that lags behind the write (slower than usual): Apply waits for the
// nodes before it writes again.
func TestFakeKernelSlowUdev(t *testing.T) {
	tr, k := withKernel(t, fakehost.P800SRIOV(), fakehost.SRIOVOptions{SlowUdevDelay: 700 * time.Millisecond})
	const pf = "0000:03:00.0"
	c := config(tr)
	c.Settle = 10 * time.Second
	k.FailNext(pf, fakehost.FaultSlowUdev)
	start := time.Now()
	_, err := apply(t, c, "0=4")
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 700*time.Millisecond)
	require.Len(t, cardOf(t, c, pf).VFs, 4)
}

// A process holding a VF node (a real char node: compared by st_rdev)
// keeps the card as it is; --wait goes through once it is gone.
func TestFakeKernelInUse(t *testing.T) {
	tr, k := withKernel(t, fakehost.P800SRIOV(), fakehost.SRIOVOptions{})
	require.True(t, tr.RealNodes)
	const pf = "0000:03:00.0"
	require.NoError(t, fakehost.FakeOpenFD(tr.Root, 4242, 9, "/dev/xpu2"))
	c := config(tr)
	c.Settle = 10 * time.Second
	n := len(k.Writes())
	_, err := apply(t, c, "0=4")
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "pid 4242 ("+fakehost.FakeProcessComm+") holding /dev/xpu2")
	require.Empty(t, k.Writes()[n:])

	c.Wait = 20 * time.Second
	go func() {
		time.Sleep(500 * time.Millisecond)
		_ = fakehost.RemoveFakeProcess(tr.Root, 4242)
	}()
	_, err = apply(t, c, "0=4")
	require.NoError(t, err)
	require.Equal(t, []string{"0", "4"}, writes(k, pf, n))
}

// R200 on driver 4.x: /proc/xpu entries come and go with the VFs, and
// their sizes follow the count.
func TestFakeKernelApplyR200(t *testing.T) {
	tr, k := withKernel(t, fakehost.R200SRIOV(), fakehost.SRIOVOptions{})
	c := config(tr)
	c.Settle = 10 * time.Second
	for _, step := range []struct {
		layout string
		pf     string
		writes []string
		vfs    int
		size   int64
	}{
		{"0=1", "0000:3b:00.0", []string{"0", "1"}, 1, 16384},
		{"0000:5e:00.0=2", "0000:5e:00.0", []string{"2"}, 2, 8192},
		{"all=3", "0000:3b:00.0", []string{"0", "3"}, 3, 5120},
		{"all=0", "0000:5e:00.0", []string{"0"}, 0, 0},
	} {
		n := len(k.Writes())
		_, err := apply(t, c, step.layout)
		require.NoError(t, err, step.layout)
		require.Equal(t, step.writes, writes(k, step.pf, n), step.layout)
		card := cardOf(t, c, step.pf)
		require.Equal(t, step.vfs, card.NumVFs)
		require.Len(t, card.VFs, step.vfs)
		require.Equal(t, step.size, card.VFMemoryMiB, step.layout)
	}
}

// p800-quarters: the quarters card back to halves, the whole one in
// quarters, in one apply.
func TestFakeKernelP800Quarters(t *testing.T) {
	tr, _ := withKernel(t, fakehost.P800Quarters(), fakehost.SRIOVOptions{})
	c := config(tr)
	c.Settle = 10 * time.Second
	h, err := c.withDefaults().Discover()
	require.NoError(t, err)
	cards := partition.Cards(h)
	require.Len(t, cards, 2)
	require.Equal(t, 4, cards[0].NumVFs)
	layout := cards[0].Address + "=2," + cards[1].Address + "=4"
	_, err = apply(t, c, layout)
	require.NoError(t, err)
	require.Equal(t, 2, cardOf(t, c, cards[0].Address).NumVFs)
	after := cardOf(t, c, cards[1].Address)
	require.Len(t, after.VFs, 4)
	require.Equal(t, int64(24576), after.VFMemoryMiB)
}

// A process that opens a card while Apply writes the cards before it (the
// fake kernel's all=4 over two cards; the process opens the second card's
// PF node once the first is laid out, through the apply loop's seam) keeps
// that card as it is: Apply refuses it, naming the process, the first card
// stays in quarters, the spec follows (AfterApply) and the error says so.
func TestFakeKernelCardOpenedMidApply(t *testing.T) {
	tr, k := withKernel(t, fakehost.P800SRIOV(), fakehost.SRIOVOptions{})
	const first, second = "0000:03:00.0", "0000:83:00.0"
	c := config(tr)
	c.Settle = 10 * time.Second
	var after []*discover.Host
	c.AfterApply = func(h *discover.Host) error { after = append(after, h); return nil }
	c.hooks = &applyHooks{beforeCard: func(addr string) {
		if addr != second {
			return
		}
		require.Equal(t, 4, k.NumVFs(first), "the first card is laid out before the second is checked")
		node := "/dev/xpu" + strconv.Itoa(cardOf(t, c, second).Index)
		require.NoError(t, fakehost.FakeOpenFD(tr.Root, 4343, 7, node))
	}}
	n := len(k.Writes())
	rep, err := apply(t, c, "all=4")
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "pid 4343 ("+fakehost.FakeProcessComm+")")
	require.ErrorContains(t, err, "the cards before it are laid out as asked")
	require.Equal(t, []string{"0", "4"}, writes(k, first, n))
	require.Empty(t, writes(k, second, n), "the card opened meanwhile is not written")
	require.Equal(t, 4, k.NumVFs(first))
	require.Equal(t, 0, k.NumVFs(second))
	require.Equal(t, 4, rep.Cards[0].After)
	require.Equal(t, 0, rep.Cards[1].After)
	require.Len(t, after, 1, "the spec follows the card that changed")
	require.Equal(t, "0=4,3=0", partition.Current(after[0]).String())
}

// Another apply lays the card out between this apply's plan and its lock:
// planned again under the lock, this apply writes nothing.
func TestFakeKernelPlansAgainUnderTheLock(t *testing.T) {
	tr, k := withKernel(t, fakehost.P800SRIOV(), fakehost.SRIOVOptions{})
	const pf = "0000:83:00.0"
	c := config(tr)
	c.Settle = 10 * time.Second
	other := c
	c.hooks = &applyHooks{beforeLock: func() {
		_, err := apply(t, other, "3=2")
		require.NoError(t, err)
	}}
	n := len(k.Writes())
	rep, err := apply(t, c, "3=2")
	require.NoError(t, err)
	require.False(t, rep.Changed())
	require.Equal(t, []string{"2"}, writes(k, pf, n), "only the other apply wrote")
}
