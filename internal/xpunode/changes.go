package xpunode

import (
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Changes is what changed between two scans the daemons count in their
// metrics: devices present in both whose health changed, and whether the
// layout (which devices there are, their model and memory, so a card cut
// into partitions or put back whole) changed.
type Changes struct {
	ToHealthy, ToUnhealthy int
	Relayout               bool
}

// ChangeTracker remembers the last scan a daemon observed. The first scan
// is the baseline: it changes nothing. Safe for concurrent use.
type ChangeTracker struct {
	mu     sync.Mutex
	seen   bool
	health map[string]string
	layout string
}

// Observe compares devs with the last scan observed and remembers devs.
func (t *ChangeTracker) Observe(devs []Device) Changes {
	health := make(map[string]string, len(devs))
	for _, d := range devs {
		health[d.ID] = d.Health
	}
	layout := layoutOf(devs)
	t.mu.Lock()
	defer t.mu.Unlock()
	var c Changes
	if t.seen {
		for id, h := range health {
			was, ok := t.health[id]
			switch {
			case !ok || was == h:
			case h == Healthy:
				c.ToHealthy++
			default:
				c.ToUnhealthy++
			}
		}
		c.Relayout = layout != t.layout
	}
	t.seen, t.health, t.layout = true, health, layout
	return c
}

// layoutOf is the devices' IDs, models and memory sizes, in ID order.
func layoutOf(devs []Device) string {
	parts := make([]string, len(devs))
	for i, d := range devs {
		parts[i] = d.ID + "/" + d.Facts.Model + "/" + strconv.FormatInt(d.Facts.MemoryMiB, 10)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
