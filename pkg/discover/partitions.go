package discover

import "slices"

// PartitionModel is what is public about cutting one board model into
// SR-IOV partitions (VFs). This file is the one place these facts live; a
// host that reports otherwise is one edit here away. Sources: the reference
// "P800 partitions" (HAMi's enable-kunlunxin-vxpu.md and Project-HAMi/HAMi#1548 and #1629;
// the vendor's xpuml model enum kunlunxin/go-xpuml).
type PartitionModel struct {
	// Board is the model of the card (Facts.Board): P800, R200.
	Board string
	// VFCounts are the numbers of VFs the card may be cut into, ascending;
	// 0 (the whole card) is always allowed and not listed.
	VFCounts []int
	// VFMemoryMiB is the memory of each VF by the card's VF count.
	VFMemoryMiB map[int]int64
}

// partitionModels are the boards with known partition layouts.
//
// P800: halves (49152 MiB) or quarters (24576 MiB), one size per card
// (HAMi's docs, driver >= 5.0.21.16); whether 1 VF is a valid P800 layout is
// not public, so it is not offered. R200: 1, 2 or 3 VFs, R200-VF-16G, -8G,
// -5G (xpuml's model enum).
var partitionModels = map[string]PartitionModel{
	"P800": {Board: "P800", VFCounts: []int{2, 4}, VFMemoryMiB: map[int]int64{2: 49152, 4: 24576}},
	"R200": {Board: "R200", VFCounts: []int{1, 2, 3}, VFMemoryMiB: map[int]int64{1: 16384, 2: 8192, 3: 5120}},
}

// PartitionModelOf returns the partition facts of a board (Facts.Board);
// false when nothing public says how it is cut.
func PartitionModelOf(board string) (PartitionModel, bool) {
	m, ok := partitionModels[board]
	return m, ok
}

// Allows reports whether the board may be cut into n VFs (0: whole).
func (m PartitionModel) Allows(n int) bool {
	return n == 0 || slices.Contains(m.VFCounts, n)
}

// handleLimits is the number of device handles the driver of a generation
// supports per host: every PF and every VF takes one. "The driver supports
// at most 32 handles" (HAMi enable-kunlunxin-vxpu.md, P800): 8 cards of 2
// VFs (24) fit, 6 of 8 cards with 4 VFs (32) fit, 8 cards with 4 VFs (40)
// do not. Nothing public gives Kunlun2's limit.
var handleLimits = map[string]int{GenerationKunlun3: 32}

// HandleLimit is the per-host handle budget of a generation's driver; 0
// when no public source gives one.
func HandleLimit(generation string) int { return handleLimits[generation] }
