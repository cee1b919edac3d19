package deviceplugin

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
)

// replicaID is the advertised ID of replica k of the XPU with ID id.
func replicaID(id string, k int) string { return id + names.ReplicaSeparator + strconv.Itoa(k) }

// PhysicalID returns the ID of the XPU behind an advertised ID: the CDI
// device name. Without sharing it is id itself.
func PhysicalID(id string) string {
	phys, _, _ := strings.Cut(id, names.ReplicaSeparator)
	return phys
}

// replicaNumber is the k of "N::k", 0 for an ID without one.
func replicaNumber(id string) int {
	_, k, ok := strings.Cut(id, names.ReplicaSeparator)
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(k)
	return n
}

// replicate returns each device of devs n times under replica IDs, with
// the device's health, reason and NUMA node: a replica is exactly as usable
// as its XPU. With n <= 1 it returns devs.
func replicate(devs []Device, n int) []Device {
	if n <= 1 {
		return devs
	}
	out := make([]Device, 0, len(devs)*n)
	for _, d := range devs {
		for k := range n {
			r := d
			r.ID = replicaID(d.ID, k)
			out = append(out, r)
		}
	}
	return out
}

// physicalIDs returns the XPUs behind ids, each once, in the order of
// their first replica: two replicas of one XPU in one container are one
// device to the engine (a CDI name given twice would be an error to some).
func physicalIDs(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if p := PhysicalID(id); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// preferredReplicas picks size replicas among available, always including
// mustInclude, on as many distinct XPUs as it can: a container asking for
// several replicas wants several XPUs, not several slices of one. Among
// XPUs not yet in the request it prefers, in order, one on a NUMA node the
// request already uses, the XPU with the most free replicas (the least
// shared with other containers now), the lowest index; within an XPU, the
// lowest replica. Only when every XPU with a free replica is in the request
// does it take a second replica of one. Unknown IDs are left out; the
// result is sorted by index and replica.
func preferredReplicas(devs []Device, available, mustInclude []string, size int) []string {
	byID := make(map[string]Device, len(devs))
	for _, d := range devs {
		byID[d.ID] = d
	}
	taken := map[string]bool{}
	var out []Device
	inRequest := map[string]int{} // physical ID -> replicas taken
	nodes := map[int]bool{}
	take := func(d Device) {
		taken[d.ID] = true
		out = append(out, d)
		inRequest[PhysicalID(d.ID)]++
		nodes[d.NUMANode] = true
	}
	for _, id := range mustInclude {
		if d, ok := byID[id]; ok && !taken[id] && len(out) < size {
			take(d)
		}
	}
	free := map[string][]Device{} // physical ID -> free replicas
	for _, id := range available {
		if d, ok := byID[id]; ok && !taken[id] {
			taken[id] = true
			free[PhysicalID(id)] = append(free[PhysicalID(id)], d)
		}
	}
	for _, reps := range free {
		slices.SortFunc(reps, func(a, b Device) int { return replicaNumber(a.ID) - replicaNumber(b.ID) })
	}
	for len(out) < size {
		best := ""
		for phys, reps := range free {
			if len(reps) == 0 {
				continue
			}
			if best == "" || betterXPU(phys, best, free, inRequest, nodes) < 0 {
				best = phys
			}
		}
		if best == "" {
			break
		}
		take(free[best][0])
		free[best] = free[best][1:]
	}
	slices.SortFunc(out, func(a, b Device) int {
		return cmp.Or(a.Index-b.Index, replicaNumber(a.ID)-replicaNumber(b.ID))
	})
	ids := make([]string, len(out))
	for i, d := range out {
		ids[i] = d.ID
	}
	return ids
}

// betterXPU orders two XPUs with free replicas for preferredReplicas:
// negative when a is the better next pick.
func betterXPU(a, b string, free map[string][]Device, inRequest map[string]int, nodes map[int]bool) int {
	da, db := free[a][0], free[b][0]
	return cmp.Or(
		cmp.Compare(inRequest[a], inRequest[b]),
		cmp.Compare(boolRank(!nodes[da.NUMANode]), boolRank(!nodes[db.NUMANode])),
		cmp.Compare(len(free[b]), len(free[a])),
		cmp.Compare(da.Index, db.Index),
	)
}
