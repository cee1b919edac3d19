package deviceplugin

import (
	"cmp"
	"maps"
	"slices"
)

// preferred picks size devices among available (IDs the kubelet may give),
// always including mustInclude. The choice, in order:
//  1. the must-include devices;
//  2. if the rest fits on one NUMA node: the node of the must-include devices
//     when they share one and it has room, else the node that fits with the
//     fewest free devices (keeping larger nodes whole for larger requests),
//     the lower node number on a tie; within the node, lowest indices first;
//  3. otherwise the lowest indices, nodes of the must-include devices first.
//
// IDs the plugin does not know (they cannot come from the kubelet, which
// only has what ListAndWatch sent) are left out. The result is sorted by
// index; it is shorter than size only when available is.
func preferred(devs []Device, available, mustInclude []string, size int) []string {
	byID := make(map[string]Device, len(devs))
	for _, d := range devs {
		byID[d.ID] = d
	}
	chosen := map[string]bool{}
	var out []Device
	mustNodes := map[int]bool{}
	for _, id := range mustInclude {
		if d, ok := byID[id]; ok && !chosen[id] && len(out) < size {
			chosen[id] = true
			out = append(out, d)
			mustNodes[d.NUMANode] = true
		}
	}
	var free []Device
	for _, id := range available {
		if d, ok := byID[id]; ok && !chosen[id] {
			chosen[id] = true
			free = append(free, d)
		}
	}
	slices.SortFunc(free, func(a, b Device) int { return a.Index - b.Index })
	need := size - len(out)
	if need <= 0 {
		return ids(out)
	}

	perNode := map[int][]Device{}
	for _, d := range free {
		perNode[d.NUMANode] = append(perNode[d.NUMANode], d)
	}
	node, ok := fittingNode(perNode, mustNodes, need)
	if ok {
		return ids(append(out, perNode[node][:need]...))
	}
	slices.SortStableFunc(free, func(a, b Device) int {
		// Nodes of the must-include devices first; else index order.
		return cmp.Compare(boolRank(!mustNodes[a.NUMANode]), boolRank(!mustNodes[b.NUMANode]))
	})
	if need > len(free) {
		need = len(free)
	}
	return ids(append(out, free[:need]...))
}

// fittingNode returns the NUMA node whose free devices hold need more: the
// single node of the must-include devices if it fits, else the best fit.
func fittingNode(perNode map[int][]Device, mustNodes map[int]bool, need int) (int, bool) {
	if len(mustNodes) == 1 {
		for n := range mustNodes {
			if len(perNode[n]) >= need {
				return n, true
			}
		}
	}
	if len(mustNodes) > 1 {
		return 0, false
	}
	best, found := 0, false
	for _, n := range slices.Sorted(maps.Keys(perNode)) {
		if len(perNode[n]) < need {
			continue
		}
		if !found || len(perNode[n]) < len(perNode[best]) {
			best, found = n, true
		}
	}
	return best, found
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ids returns the IDs of devs sorted by index.
func ids(devs []Device) []string {
	slices.SortFunc(devs, func(a, b Device) int { return a.Index - b.Index })
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.ID
	}
	return out
}
