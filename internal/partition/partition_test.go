package partition

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
)

func TestCardsP800SRIOV(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
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
	tr := build(t, fakehosttest.P800x8SRIOV())
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

func TestShowProcessUsers(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	defer fakehosttest.HoldOpen(t, tr, 4242, 7, "python3", "/dev/xpu2")()
	defer fakehosttest.HoldOpen(t, tr, 77, 3, "xpu-smi", "/dev/xpu3")()
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
