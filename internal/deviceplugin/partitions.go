package deviceplugin

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// PartitionStrategy is how the plugin advertises SR-IOV partitions (VFs)
// next to whole cards.
type PartitionStrategy string

const (
	// PartitionMixed advertises whole cards as the resource name and each
	// partition size as a resource of its own, the resource name plus the
	// size (baidu.com/xpu-48gb, baidu.com/xpu-24gb): one registration per
	// resource, as NVIDIA's mixed MIG strategy. On a node without
	// partitions it is the one resource of before.
	PartitionMixed PartitionStrategy = "mixed"
	// PartitionSingle advertises every device as the resource name, and
	// only when all of them have one size (a node whose cards are all cut
	// alike, or none is cut): the plugin refuses to start otherwise.
	PartitionSingle PartitionStrategy = "single"
)

// PartitionStrategies lists the partition strategies, default first.
var PartitionStrategies = []PartitionStrategy{PartitionMixed, PartitionSingle}

// ParsePartitionStrategy checks a --partition-strategy value.
func ParsePartitionStrategy(s string) (PartitionStrategy, error) {
	for _, st := range PartitionStrategies {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown partition strategy %q: use mixed (whole cards as RESOURCE, each partition size as RESOURCE-48gb ...) or single (every device as RESOURCE, all of one size)", s)
}

// isPartition reports whether d is an SR-IOV VF: a partition of its card.
func isPartition(d Device) bool {
	return d.XPU != nil && d.XPU.PCI != nil && d.XPU.PCI.Function == discover.FunctionVF
}

// grouping is the devices of one scan sorted into the (unshared) resource
// names they are advertised as.
type grouping struct {
	// byResource maps a resource name to its devices, in index order.
	byResource map[string][]Device
	// unsized are partitions whose size the host does not tell: the mixed
	// strategy cannot name their resource and leaves them out.
	unsized []Device
	// mixedSizes, under the single strategy, says why the devices are not
	// all of one size (empty when they are).
	mixedSizes string
	// size is, under single, the one size of the devices (-1 without any).
	size int64
}

// group sorts devs into resources by strategy s. base is the plugin's
// resource name (whole cards).
func group(s PartitionStrategy, base string, devs []Device) grouping {
	g := grouping{byResource: map[string][]Device{base: nil}, size: -1}
	if s == PartitionSingle {
		g.byResource[base] = devs
		bySize := map[int64][]Device{}
		for _, d := range devs {
			bySize[d.Facts.MemoryMiB] = append(bySize[d.Facts.MemoryMiB], d)
		}
		switch len(bySize) {
		case 0:
		case 1:
			for size := range bySize {
				g.size = size
			}
		default:
			g.mixedSizes = describeSizes(bySize)
		}
		return g
	}
	for _, d := range devs {
		switch {
		case !isPartition(d):
			g.byResource[base] = append(g.byResource[base], d)
		case d.Facts.MemoryMiB <= 0:
			g.unsized = append(g.unsized, d)
		default:
			name := names.PartitionResource(base, d.Facts.MemoryMiB)
			g.byResource[name] = append(g.byResource[name], d)
		}
	}
	return g
}

// describeSizes says which devices have which size, largest first:
// "96gb: XPU 3 (whole card); 48gb: XPU 1, 2 (partitions of 0000:03:00.0)".
func describeSizes(bySize map[int64][]Device) string {
	var parts []string
	for _, size := range slices.Backward(slices.Sorted(maps.Keys(bySize))) {
		name := names.PartitionSizeName(size)
		if name == "" {
			name = "size unknown"
		}
		var ids, parents []string
		whole := false
		for _, d := range bySize[size] {
			ids = append(ids, d.ID)
			if isPartition(d) {
				if p := d.XPU.PCI.Parent; !slices.Contains(parents, p) {
					parents = append(parents, p)
				}
			} else {
				whole = true
			}
		}
		var what []string
		if whole {
			what = append(what, "whole card")
		}
		if len(parents) > 0 {
			what = append(what, "partitions of "+strings.Join(parents, ", "))
		}
		parts = append(parts, fmt.Sprintf("%s: XPU %s (%s)", name, strings.Join(ids, ", "), strings.Join(what, "; ")))
	}
	return strings.Join(parts, "; ")
}
