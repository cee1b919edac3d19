package dra

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"
)

// The order of the published devices is the order in which the scheduler
// tries them. Its allocator (k8s.io/dynamic-resource-allocation/structured)
// does not score devices: for each request it walks the node's pools, each
// pool's slices and each slice's devices in their order, and takes the
// first device that is free and matches. The incubating and experimental
// variants (the latter is the one that handles compatibility groups, so
// dynamic mode's) sort a pool's slices by name, and the ResourceSlice
// controller names them after their index (a zero-padded prefix): the walk
// follows the order poolOf gives across the whole pool. The stable variant
// keeps the slices in the order its informer lists them, so there only a
// slice's own order is certain; a static node fits in one slice (the
// handle budget keeps it far below the API's devices per slice).
//
// Jobs ask for "at least N GiB" (the memory capacity), so a job may fit a
// larger device than it needs, and first fit then hands it the largest
// one listed first. Listing the whole card before its slots let a quarter
// job take a whole card whenever one was free; in dynamic mode that made
// the card unusable for the larger jobs that followed, and in static mode
// the small jobs took the whole cards before the VFs meant for them
// (make bench-utilization measured both, docs/benchmarks.md). The driver
// therefore publishes devices best fit first: smallest memory first, so
// that the first match is the smallest device that holds the request;
// devices whose memory no source tells come last, since nothing says they
// are small. The sort is stable, so within a size the build order stays:
// the index of /dev/xpuN in static mode, card then slot in dynamic mode.

// bestFitOrder sorts devs smallest memory capacity first, devices without
// one last, keeping the order of equal ones.
func bestFitOrder(devs []resourceapi.Device) {
	slices.SortStableFunc(devs, func(a, b resourceapi.Device) int {
		ma, okA := a.Capacity[CapacityMemory]
		mb, okB := b.Capacity[CapacityMemory]
		switch {
		case okA && okB:
			return ma.Value.Cmp(mb.Value)
		case okA:
			return -1
		case okB:
			return 1
		}
		return 0
	})
}
