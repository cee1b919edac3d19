package partition

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Card is one physical card (an SR-IOV physical function) of a node, as
// `partition show` prints it.
type Card struct {
	// Index is the N of the PF's /dev/xpuN; -1 when the PF has no node of
	// its own (only its VFs were found).
	Index int `json:"index"`
	// Address is the PF's PCI address (0000:3b:00.0).
	Address string `json:"address"`
	// Model is the PF's model (P800, R200), Board the card's (Facts.Board).
	Model string `json:"model"`
	Board string `json:"board"`
	// Generation is the chip generation (Kunlun2, Kunlun3), which decides
	// the handle budget.
	Generation string `json:"generation,omitempty"`
	// NumVFs is the number of VFs enabled now (sriov_numvfs), TotalVFs the
	// most the function supports (sriov_totalvfs; 0: no SR-IOV).
	NumVFs   int `json:"numVFs"`
	TotalVFs int `json:"totalVFs"`
	// Allowed are the VF counts a layout may give the card, ascending,
	// 0 (the whole card) first.
	Allowed []int `json:"allowed"`
	// MemoryMiB is the whole card's memory; VFMemoryMiB each VF's under
	// the current layout, 0 when the card is whole.
	MemoryMiB   int64 `json:"memoryMiB,omitempty"`
	VFMemoryMiB int64 `json:"vfMemoryMiB,omitempty"`
	// VFs are the card's enabled VFs that have a node, by index.
	VFs []VF `json:"vfs,omitempty"`
	// InUse are the processes and containers holding one of the card's
	// nodes (filled by Show and Apply, not by Cards).
	InUse []User `json:"inUse,omitempty"`
}

// VF is one partition of a card.
type VF struct {
	// Index is the N of the VF's /dev/xpuN.
	Index     int    `json:"index"`
	Address   string `json:"address"`
	MemoryMiB int64  `json:"memoryMiB,omitempty"`
	// Node is the VF's node as containers see it (/dev/xpu3).
	Node string `json:"node"`
}

// User is who holds one of a card's nodes: a process on the host (PID,
// Command) or a container the kubelet gave the device to (Pod, Namespace,
// Container), or both.
type User struct {
	PID     int    `json:"pid,omitempty"`
	Command string `json:"command,omitempty"`
	// Node is the node held (/dev/xpu3); for a container, the device the
	// kubelet assigned.
	Node      string `json:"node,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Container string `json:"container,omitempty"`
	// Claim is the DRA claim a container holds the device through.
	Claim string `json:"claim,omitempty"`
	// Mapped says the process holds the node through a memory mapping
	// only (its descriptor closed after mmap).
	Mapped bool `json:"mapped,omitempty"`
}

// String names the user for messages: "pid 42 (python)",
// "pod ml/train container main".
func (u User) String() string {
	var s string
	if u.PID > 0 {
		s = "pid " + strconv.Itoa(u.PID)
		if u.Command != "" {
			s += " (" + u.Command + ")"
		}
	}
	if u.Pod != "" {
		if s != "" {
			s += ", "
		}
		s += "pod " + u.Namespace + "/" + u.Pod
		if u.Container != "" {
			s += " container " + u.Container
		}
		if u.Claim != "" {
			s += " claim " + u.Claim
		}
	}
	switch {
	case u.Node != "" && u.Mapped:
		s += " mapping " + u.Node
	case u.Node != "":
		s += " holding " + u.Node
	}
	return s
}

// Status is what `partition show` reports.
type Status struct {
	Cards []Card `json:"cards"`
	// HandlesUsed counts the node's PFs and VFs; HandleLimit is the
	// driver's budget (0: no public source gives one).
	HandlesUsed int `json:"handlesUsed"`
	HandleLimit int `json:"handleLimit"`
	// Layout is the node's layout in canonical form (Current).
	Layout string `json:"layout"`
	// Notes say what could not be checked (no PodResources socket, ...).
	Notes []string `json:"notes,omitempty"`
}

// Cards returns the physical cards of a discovery, by PCI address, with
// their VFs; no I/O. A device without PCI facts is no card. Kunlun1's
// power domains (two nodes on one function) are one card, the lowest
// index.
func Cards(h *discover.Host) []Card {
	byAddr := map[string]*Card{}
	var order []string
	get := func(addr string) *Card {
		c := byAddr[addr]
		if c == nil {
			c = &Card{Index: -1, Address: addr}
			byAddr[addr] = c
			order = append(order, addr)
		}
		return c
	}
	for _, d := range h.Devices {
		if d.PCI == nil || d.PCI.Address == "" {
			continue
		}
		f := h.FactsOf(d)
		switch d.PCI.Function {
		case discover.FunctionVF:
			if d.PCI.Parent == "" {
				continue
			}
			c := get(d.PCI.Parent)
			c.VFs = append(c.VFs, VF{Index: d.Index, Address: d.PCI.Address, MemoryMiB: f.MemoryMiB, Node: d.Node.Path})
			if c.Index < 0 {
				// No PF node (yet): what the VF tells of its card.
				c.Board, c.Generation = f.Board, f.Generation
				if c.Model == "" {
					c.Model = f.Board
				}
				c.NumVFs = d.PCI.ParentNumVFs
			}
		case discover.FunctionPF:
			c := get(d.PCI.Address)
			if c.Index >= 0 && c.Index < d.Index {
				continue
			}
			c.Index, c.Model, c.Board, c.Generation = d.Index, d.Model, f.Board, f.Generation
			c.NumVFs, c.TotalVFs, c.MemoryMiB = d.PCI.NumVFs, d.PCI.TotalVFs, f.MemoryMiB
		}
	}
	out := make([]Card, 0, len(order))
	for _, addr := range order {
		c := byAddr[addr]
		slices.SortFunc(c.VFs, func(a, b VF) int { return a.Index - b.Index })
		c.Allowed = allowed(c.Board, c.TotalVFs)
		c.VFMemoryMiB = vfMemory(*c)
		out = append(out, *c)
	}
	slices.SortFunc(out, compareCards)
	return out
}

// DynamicCards returns the cards the DRA driver's dynamic partition mode
// may cut (with a PF node, and a VF count the board allows) by their
// number in its device names (names.DRACardDevice): their place in PCI
// address order among all the node's cards, which neither a re-layout nor
// a new numbering of the nodes at boot changes.
func DynamicCards(h *discover.Host) map[int]Card {
	cards := Cards(h)
	slices.SortFunc(cards, func(a, b Card) int { return strings.Compare(a.Address, b.Address) })
	out := map[int]Card{}
	for ordinal, c := range cards {
		if c.Index >= 0 && len(c.Allowed) >= 2 {
			out[ordinal] = c
		}
	}
	return out
}

// compareCards orders cards by index, the cards without a PF node last by
// address.
func compareCards(a, b Card) int {
	switch {
	case a.Index >= 0 && b.Index >= 0:
		return a.Index - b.Index
	case a.Index >= 0:
		return -1
	case b.Index >= 0:
		return 1
	}
	if a.Address < b.Address {
		return -1
	}
	if a.Address > b.Address {
		return 1
	}
	return 0
}

// allowed are the VF counts a card of the board with totalVFs may have:
// 0, and the counts the board's partition facts allow up to totalVFs.
func allowed(board string, totalVFs int) []int {
	out := []int{0}
	m, ok := discover.PartitionModelOf(board)
	if !ok || totalVFs <= 0 {
		return out
	}
	for _, n := range m.VFCounts {
		if n <= totalVFs {
			out = append(out, n)
		}
	}
	return out
}

// vfMemory is the size of each VF of c now: its VFs' (procfs, else the
// partition table), else the table's for its count; 0 when whole.
func vfMemory(c Card) int64 {
	if c.NumVFs <= 0 {
		return 0
	}
	for _, v := range c.VFs {
		if v.MemoryMiB > 0 {
			return v.MemoryMiB
		}
	}
	return SizeMiB(c.Board, c.NumVFs)
}

// SizeMiB is the memory of each of n VFs of a board (the partition
// table); 0 for n = 0 or a count the table does not know.
func SizeMiB(board string, n int) int64 {
	m, ok := discover.PartitionModelOf(board)
	if !ok || n <= 0 {
		return 0
	}
	return m.VFMemoryMiB[n]
}

// Handles returns the handles the cards use (every PF and every VF takes
// one) and the driver's budget for them (HandleLimit of their generation;
// the smallest where generations are mixed, 0 when none is known).
func Handles(cards []Card) (used, limit int) {
	for _, c := range cards {
		used += 1 + c.NumVFs
		if l := discover.HandleLimit(c.Generation); l > 0 && (limit == 0 || l < limit) {
			limit = l
		}
	}
	return used, limit
}

// Current returns the host's layout in canonical form: all=N when every
// card has N VFs, else one entry per card (its index, or its PCI address
// when it has no PF node) in card order.
func Current(h *discover.Host) Layout {
	return LayoutOf(Cards(h))
}

// LayoutOf is the layout cards have, in canonical form (see Current).
func LayoutOf(cards []Card) Layout {
	if len(cards) == 0 {
		return nil
	}
	same := true
	for _, c := range cards {
		same = same && c.NumVFs == cards[0].NumVFs
	}
	if same {
		return Layout{{Selector: SelectorAll, VFs: cards[0].NumVFs}}
	}
	l := make(Layout, 0, len(cards))
	for _, c := range cards {
		l = append(l, Entry{Selector: c.selector(), VFs: c.NumVFs})
	}
	return l
}

// selector is how a layout names the card: its index, else its address.
func (c Card) selector() string {
	if c.Index >= 0 {
		return strconv.Itoa(c.Index)
	}
	return c.Address
}

// Name names the card for messages: "card 0 (0000:3b:00.0)".
func (c Card) Name() string {
	if c.Index >= 0 {
		return "card " + strconv.Itoa(c.Index) + " (" + c.Address + ")"
	}
	return "card " + c.Address + " (no PF node)"
}

// Partitioning describes how the card is cut, as `partition show` and
// `info` print it: "whole (96gb)", "2 x 48gb (1/2)", "4 x ? (1/4)" when
// no public size is known for the count.
func (c Card) Partitioning() string {
	if c.NumVFs == 0 {
		if c.MemoryMiB > 0 {
			return "whole (" + names.PartitionSizeName(c.MemoryMiB) + ")"
		}
		return "whole"
	}
	size := "?"
	if c.VFMemoryMiB > 0 {
		size = names.PartitionSizeName(c.VFMemoryMiB)
	}
	return fmt.Sprintf("%d x %s (%s)", c.NumVFs, size, names.PartitionFraction(c.NumVFs))
}

// HandlesText says how many of the driver's device handles are used, of
// its limit where one is public.
func HandlesText(used, limit int) string {
	if limit > 0 {
		return fmt.Sprintf("%d used of %d (every PF and every VF takes one)", used, limit)
	}
	return fmt.Sprintf("%d used (every PF and every VF takes one; no public limit for this driver)", used)
}
