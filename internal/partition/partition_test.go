package partition

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources/podresourcestest"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func TestCardsP800SRIOV(t *testing.T) {
	tr := build(t, p800SRIOV())
	h := discoverTree(t, tr)
	cards := Cards(h)
	require.Len(t, cards, 2)
	c := cards[0]
	require.Equal(t, 0, c.Index)
	require.Equal(t, "0000:03:00.0", c.Address)
	require.Equal(t, "P800", c.Board)
	require.Equal(t, 2, c.NumVFs)
	require.Equal(t, 4, c.TotalVFs)
	require.Equal(t, []int{0, 2, 4}, c.Allowed)
	require.Equal(t, int64(49152), c.VFMemoryMiB)
	require.Equal(t, []VF{
		{Index: 1, Address: "0000:03:00.1", MemoryMiB: 49152, Node: "/dev/xpu1"},
		{Index: 2, Address: "0000:03:00.2", MemoryMiB: 49152, Node: "/dev/xpu2"},
	}, c.VFs)
	require.Equal(t, 3, cards[1].Index)
	require.Equal(t, 0, cards[1].NumVFs)
	require.Zero(t, cards[1].VFMemoryMiB)
	used, limit := Handles(cards)
	require.Equal(t, 4, used) // 2 PFs + 2 VFs
	require.Equal(t, 32, limit)
	require.Equal(t, "0=2,3=0", Current(h).String())
}

func TestCardsR200SRIOV(t *testing.T) {
	tr := build(t, fakehost.R200SRIOV())
	h := discoverTree(t, tr)
	cards := Cards(h)
	require.Len(t, cards, 2)
	require.Equal(t, "R200", cards[0].Board)
	require.Equal(t, 3, cards[0].NumVFs)
	require.Equal(t, []int{0, 1, 2, 3}, cards[0].Allowed)
	require.Equal(t, int64(5120), cards[0].VFMemoryMiB)
	require.Len(t, cards[0].VFs, 3)
	require.Equal(t, "Kunlun2", cards[0].Generation)
	_, limit := Handles(cards)
	require.Zero(t, limit, "no public handle budget for Kunlun2")
	require.Equal(t, "0=3,1=0", Current(h).String())
}

func TestCurrentAll(t *testing.T) {
	tr := build(t, p800x8SRIOV())
	require.Equal(t, "all=0", Current(discoverTree(t, tr)).String())
}

// cardsOf returns n P800 cards with sriov_totalvfs 4 and no VFs.
func cardsOf(n int) []Card {
	var out []Card
	for i := range n {
		out = append(out, Card{
			Index: i, Address: "0000:0" + string(rune('1'+i)) + ":00.0", Model: "P800", Board: "P800",
			Generation: "Kunlun3", TotalVFs: 4, Allowed: []int{0, 2, 4},
		})
	}
	return out
}

func TestPlanResolution(t *testing.T) {
	cards := cardsOf(3)
	l, err := ParseLayout("all=2,0000:02:00.0=4,2=0")
	require.NoError(t, err)
	changes, err := Plan(cards, l)
	require.NoError(t, err)
	require.Equal(t, []int{2, 4, 0}, []int{changes[0].To, changes[1].To, changes[2].To})
	// Cards no entry selects keep their count.
	cards[2].NumVFs = 2
	l, _ = ParseLayout("0=4")
	changes, err = Plan(cards, l)
	require.NoError(t, err)
	require.Equal(t, []int{4, 0, 2}, []int{changes[0].To, changes[1].To, changes[2].To})
	require.Equal(t, 2, changes[2].From)
}

func TestPlanRefusals(t *testing.T) {
	noSRIOV := cardsOf(2)
	noSRIOV[1].TotalVFs, noSRIOV[1].Allowed = 0, []int{0}
	twoOnly := cardsOf(1)
	twoOnly[0].TotalVFs, twoOnly[0].Allowed = 2, []int{0, 2}
	unknown := cardsOf(1)
	unknown[0].Board, unknown[0].Model = "R300", "R300"
	tests := []struct {
		description string
		cards       []Card
		layout      string
		want        []string
	}{
		{"unknown index", cardsOf(2), "5=2", []string{"5=2: no such card on this node"}},
		{"unknown address", cardsOf(2), "0000:99:00.0=2", []string{"0000:99:00.0=2: no such card"}},
		{"count the model does not allow", cardsOf(2), "1=3", []string{"card 1 (0000:02:00.0) (P800): 3 VFs is not a layout of a P800: allowed 0, 2, 4"}},
		{"above sriov_totalvfs", twoOnly, "all=4", []string{"card 0 (0000:01:00.0) (P800): 4 VFs asked, more than its sriov_totalvfs 2"}},
		{"no SR-IOV", noSRIOV, "all=2", []string{"card 1 (0000:02:00.0) (P800): 2 VFs asked, but the card has no SR-IOV"}},
		{"board without public partitions", unknown, "0=2", []string{"nothing public says how a R300 is partitioned"}},
		{"handle budget", cardsOf(8), "all=4", []string{"needs 40 device handles (every PF and every VF takes one: 8 PFs + 32 VFs), more than the 32 the Kunlun3 driver supports"}},
		{"several at once", cardsOf(2), "0=3,1=1,7=2", []string{"7=2: no such card", "card 0 (0000:01:00.0) (P800): 3 VFs", "card 1 (0000:02:00.0) (P800): 1 VFs"}},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			l, err := ParseLayout(tc.layout)
			require.NoError(t, err)
			_, err = Plan(tc.cards, l)
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestPlanHandleBudgetFits(t *testing.T) {
	for _, layout := range []string{"all=2", "0=4,1=4,2=4,3=4,4=4,5=4"} {
		l, err := ParseLayout(layout)
		require.NoError(t, err)
		_, err = Plan(cardsOf(8), l)
		require.NoError(t, err, layout)
	}
}

// A refused layout writes nothing: every sriov_numvfs keeps its content
// and its modification time.
func TestApplyRefusedChangesNothing(t *testing.T) {
	tr := build(t, p800x8SRIOV())
	before := snapshot(t, tr)
	for _, layout := range []string{"all=4", "all=3", "9=2", "all=2,0=3"} {
		l, err := ParseLayout(layout)
		require.NoError(t, err)
		_, err = Apply(context.Background(), config(tr), l)
		require.ErrorContains(t, err, "refused, nothing changed", layout)
	}
	require.Equal(t, before, snapshot(t, tr))
}

// A card already at its count is not written: applying the current
// layout does nothing.
func TestApplyIdempotent(t *testing.T) {
	tr := build(t, p800SRIOV())
	before := snapshot(t, tr)
	called := false
	c := config(tr)
	c.AfterApply = func(*discover.Host) error { called = true; return nil }
	for _, layout := range []string{"0=2,3=0", "0=2", "all=0,0=2"} {
		l, err := ParseLayout(layout)
		require.NoError(t, err)
		rep, err := Apply(context.Background(), c, l)
		require.NoError(t, err)
		require.False(t, rep.Changed())
		for _, cr := range rep.Cards {
			require.Empty(t, cr.Writes)
		}
	}
	require.False(t, called)
	require.Equal(t, before, snapshot(t, tr))
}

func TestShowProcessUsers(t *testing.T) {
	tr := build(t, p800SRIOV())
	defer holdOpen(t, tr, 4242, 7, "python3", "/dev/xpu2")()
	defer holdOpen(t, tr, 77, 3, "xpu-smi", "/dev/xpu3")()
	// A descriptor of something else, a dangling one and a process
	// without fds are skipped.
	require.NoError(t, os.Symlink(tr.Path("/proc/devices"), tr.Path("/proc/4242/fd/1")))
	require.NoError(t, os.Symlink(tr.Path("/nowhere"), tr.Path("/proc/4242/fd/2")))
	require.NoError(t, os.MkdirAll(tr.Path("/proc/99"), 0o755))
	s, err := Show(context.Background(), config(tr))
	require.NoError(t, err)
	require.Equal(t, []User{{PID: 4242, Command: "python3", Node: "/dev/xpu2"}}, s.Cards[0].InUse)
	require.Equal(t, []User{{PID: 77, Command: "xpu-smi", Node: "/dev/xpu3"}}, s.Cards[1].InUse)
	require.Equal(t, 4, s.HandlesUsed)
	require.Equal(t, 32, s.HandleLimit)
	require.Equal(t, "0=2,3=0", s.Layout)
}

func TestApplyRefusedInUse(t *testing.T) {
	tr := build(t, p800SRIOV())
	release := holdOpen(t, tr, 4242, 7, "python3", "/dev/xpu1")
	before := snapshot(t, tr)
	l, _ := ParseLayout("0=4")
	_, err := Apply(context.Background(), config(tr), l)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "card 0 (0000:03:00.0) is held by pid 4242 (python3) holding /dev/xpu1")
	require.ErrorContains(t, err, "--wait")
	// A card not to change may be in use.
	l, _ = ParseLayout("3=2")
	c := config(tr)
	c.DryRun = true
	rep, err := Apply(context.Background(), c, l)
	require.NoError(t, err)
	require.True(t, rep.Changed())
	require.Equal(t, "all=2", rep.After)
	require.Equal(t, before, snapshot(t, tr), "a dry run writes nothing")

	// --wait: the card is freed while Apply waits.
	c = config(tr)
	c.DryRun, c.Wait = true, 10*time.Second
	l, _ = ParseLayout("0=4")
	go func() { time.Sleep(300 * time.Millisecond); release() }()
	start := time.Now()
	rep, err = Apply(context.Background(), c, l)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, 4, rep.Cards[0].Want)

	// --wait that ends first.
	defer holdOpen(t, tr, 4243, 3, "python3", "/dev/xpu0")()
	c.Wait = 1500 * time.Millisecond
	_, err = Apply(context.Background(), c, l)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "after waiting 1.5s")
	require.ErrorContains(t, err, "pid 4243 (python3) holding /dev/xpu0")
}

func TestInUseByPods(t *testing.T) {
	tr := build(t, fakehost.R200SRIOV())
	srv := podresourcestest.NewServer(&podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{
		podresourcestest.DevicePluginPod("ml", "infer", "app", "baidu.com/xpu-5gb", "3"),
		podresourcestest.DevicePluginPod("ml", "shared", "app", "baidu.com/xpu.shared", "1::2"),
		podresourcestest.DRAPod("team", "train", "main", "one-vf", names.DRADriver, "xpu-4"),
		podresourcestest.DevicePluginPod("x", "gpu", "app", "nvidia.com/gpu", "2"),
	}})
	c := config(tr)
	c.PodResourcesSocket = podresourcestest.Serve(t, srv)
	s, err := Show(context.Background(), c)
	require.NoError(t, err)
	require.Equal(t, []User{
		{Node: "/dev/xpu3", Pod: "infer", Namespace: "ml", Container: "app"},
		{Node: "/dev/xpu4", Pod: "train", Namespace: "team", Container: "main", Claim: "one-vf"},
	}, s.Cards[0].InUse)
	require.Equal(t, []User{{Node: "/dev/xpu1", Pod: "shared", Namespace: "ml", Container: "app"}}, s.Cards[1].InUse)
	require.Empty(t, s.Notes)

	l, _ := ParseLayout("0=1")
	_, err = Apply(context.Background(), c, l)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "pod ml/infer container app holding /dev/xpu3")
	require.ErrorContains(t, err, "pod team/train container main claim one-vf holding /dev/xpu4")

	// The pods are gone: the dry run goes through.
	srv.Set(nil)
	c.DryRun = true
	_, err = Apply(context.Background(), c, l)
	require.NoError(t, err)

	// No kubelet: a note, not an error.
	c.PodResourcesSocket = t.TempDir() + "/kubelet.sock"
	s, err = Show(context.Background(), c)
	require.NoError(t, err)
	require.Len(t, s.Notes, 1)
	require.Contains(t, s.Notes[0], "no kubelet PodResources socket at")

	// A kubelet that does not answer is an error: Apply must not guess.
	blocked := &podresourcestest.Server{Block: true}
	c.PodResourcesSocket = podresourcestest.Serve(t, blocked)
	c.PodResources.Timeout = 200 * time.Millisecond
	_, err = Apply(context.Background(), c, l)
	require.ErrorContains(t, err, "asking the kubelet which pods hold the cards")
}

// A kernel that never shows the result: the write times out, and the card
// is put back to its count (the write of 0 is undone by writing 2).
func TestApplyRollbackWhenTheKernelDoesNotFollow(t *testing.T) {
	tr := build(t, p800SRIOV())
	p0, p3 := numVFsPath(t, tr, "0000:03:00.0"), numVFsPath(t, tr, "0000:83:00.0")
	require.NoError(t, os.Chmod(p0, 0o644))
	before3 := snapshot(t, tr)[p3]
	l, _ := ParseLayout("0=4,3=2")
	called := false
	c := config(tr)
	c.AfterApply = func(*discover.Host) error { called = true; return nil }
	rep, err := Apply(context.Background(), c, l)
	require.Error(t, err)
	require.ErrorContains(t, err, "card 0 (0000:03:00.0): the kernel did not show 0 VFs within 300ms")
	require.ErrorContains(t, err, "put back to 2 VFs")
	require.Equal(t, []int{0, 2}, rep.Cards[0].Writes)
	require.True(t, rep.Cards[0].RolledBack)
	require.Equal(t, 2, rep.Cards[0].After)
	require.Empty(t, rep.Cards[1].Writes, "the cards after a failure are not touched")
	require.Equal(t, before3, snapshot(t, tr)[p3])
	data, err := os.ReadFile(p0)
	require.NoError(t, err)
	require.Equal(t, "2\n", string(data))
	require.False(t, called)
	require.Equal(t, "0=2,3=0", rep.After)
}

// A PF link leading out of the root is resolved inside it, and a
// sriov_numvfs that is a symlink is never followed: nothing outside the
// root is written.
func TestApplyRefusesHostileSysfs(t *testing.T) {
	tr := build(t, p800SRIOV())
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(outside+"/sriov_numvfs", []byte("0\n"), 0o644))
	link := tr.Path("/sys/bus/pci/devices/0000:83:00.0")
	require.NoError(t, os.Remove(link))
	require.NoError(t, os.Symlink(outside, link))
	l, _ := ParseLayout("3=2")
	_, err := Apply(context.Background(), config(tr), l)
	require.Error(t, err)
	data, _ := os.ReadFile(outside + "/sriov_numvfs")
	require.Equal(t, "0\n", string(data))

	// The attribute itself a link to a file outside.
	tr = build(t, p800SRIOV())
	p3 := numVFsPath(t, tr, "0000:83:00.0")
	require.NoError(t, os.Remove(p3))
	require.NoError(t, os.Symlink(outside+"/sriov_numvfs", p3))
	_, err = Apply(context.Background(), config(tr), l)
	require.Error(t, err)
	data, _ = os.ReadFile(outside + "/sriov_numvfs")
	require.Equal(t, "0\n", string(data))
}

// A PF without a node of its own (only its VFs have one) is still a card:
// by its address, with what its VFs and its sysfs directory tell.
func TestCardWithoutPFNode(t *testing.T) {
	h := fakehost.R200SRIOV()
	h.Devices[0].NoNode = true
	tr := build(t, h)
	cards := Cards(discoverTree(t, tr))
	require.Len(t, cards, 2)
	require.Equal(t, 1, cards[0].Index)
	c := cards[1]
	require.Equal(t, -1, c.Index)
	require.Equal(t, "0000:3b:00.0", c.Address)
	require.Equal(t, "R200", c.Board)
	require.Equal(t, 3, c.NumVFs)
	require.Len(t, c.VFs, 3)
	require.Equal(t, "card 0000:3b:00.0 (no PF node)", c.Name())

	s, err := Show(context.Background(), config(tr))
	require.NoError(t, err)
	require.Equal(t, 3, s.Cards[1].TotalVFs, "read from sysfs")
	require.Equal(t, []int{0, 1, 2, 3}, s.Cards[1].Allowed)
	require.Equal(t, "1=0,0000:3b:00.0=3", s.Layout)

	c2 := config(tr)
	c2.DryRun = true
	l, _ := ParseLayout("0000:3b:00.0=2")
	rep, err := Apply(context.Background(), c2, l)
	require.NoError(t, err)
	require.Equal(t, 2, rep.Cards[1].Want)
	_, err = Apply(context.Background(), c2, Layout{{Selector: "0", VFs: 2}})
	require.ErrorContains(t, err, "0=2: no such card on this node (cards: 1 0000:5e:00.0, 0000:3b:00.0)")
}

// Kunlun1's two power domains on one PCI function are one card, without
// SR-IOV: only 0 is allowed.
func TestCardsK200(t *testing.T) {
	tr := build(t, fakehost.K200())
	cards := Cards(discoverTree(t, tr))
	require.Len(t, cards, 1)
	require.Equal(t, 0, cards[0].Index)
	require.Equal(t, []int{0}, cards[0].Allowed)
	l, _ := ParseLayout("all=1")
	_, err := Plan(cards, l)
	require.ErrorContains(t, err, "the card has no SR-IOV")
}

// Applies take turns: while another holds the node's lock, Apply waits for
// it, at most Settle (or Wait), and then refuses with nothing written.
func TestApplyLock(t *testing.T) {
	tr := build(t, p800SRIOV())
	before := snapshot(t, tr)
	c := config(tr)
	lock, err := LockLayout(context.Background(), tr.Root, time.Second)
	require.NoError(t, err)
	l, _ := ParseLayout("3=2")
	start := time.Now()
	_, err = Apply(context.Background(), c, l)
	require.ErrorIs(t, err, ErrLocked)
	require.GreaterOrEqual(t, time.Since(start), c.Settle)
	require.Equal(t, before, snapshot(t, tr))

	// A dry run does not wait for it.
	c.DryRun = true
	_, err = Apply(context.Background(), c, l)
	require.NoError(t, err)

	// Released meanwhile: the apply goes on.
	require.NoError(t, os.Chmod(numVFsPath(t, tr, "0000:83:00.0"), 0o644))
	c.DryRun, c.Wait = false, 5*time.Second
	go func() { time.Sleep(300 * time.Millisecond); lock.Unlock() }()
	c.Settle = 100 * time.Millisecond
	var reached bool
	c.hooks = &applyHooks{beforeCard: func(string) { reached = true }}
	start = time.Now()
	_, err = Apply(context.Background(), c, l)
	require.NotErrorIs(t, err, ErrLocked)
	require.True(t, reached, "past the lock once it was released")
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
}
