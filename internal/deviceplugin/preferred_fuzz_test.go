package deviceplugin

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzPreferred feeds preferred with arbitrary kubelet requests (IDs the
// plugin knows or not, duplicates, any size) on a two-node host and checks
// what the kubelet relies on: no panic, no ID twice, only IDs it offered or
// required, every required one, never more than asked.
func FuzzPreferred(f *testing.F) {
	f.Add("0,1,2,3,4,5,6,7", "", 2)
	f.Add("1,2,5,6,7", "6", 3)
	f.Add("9,x,,1,1", "1,1,8", 2)
	f.Add("0,4", "", -1)
	var devs []Device
	for i := range 8 {
		devs = append(devs, Device{ID: strconv.Itoa(i), Index: i, NUMANode: i / 4, Health: "Healthy"})
	}
	f.Fuzz(func(t *testing.T, available, must string, size int) {
		avail := strings.Split(available, ",")
		mustIDs := strings.Split(must, ",")
		if must == "" {
			mustIDs = nil
		}
		got := preferred(devs, avail, mustIDs, size)
		if len(got) > max(size, 0) {
			t.Fatalf("%d devices for a request of %d: %v", len(got), size, got)
		}
		seen := map[string]bool{}
		for _, id := range got {
			if seen[id] {
				t.Fatalf("%s twice in %v", id, got)
			}
			seen[id] = true
			if !slices.Contains(avail, id) && !slices.Contains(mustIDs, id) {
				t.Fatalf("%s was neither available nor required: %v", id, got)
			}
		}
		var known []string
		for _, id := range slices.Compact(slices.Sorted(slices.Values(mustIDs))) {
			if n, err := strconv.Atoi(id); err == nil && n >= 0 && n < 8 && strconv.Itoa(n) == id {
				known = append(known, id)
			}
		}
		// The kubelet never asks for fewer than it requires; when it does
		// not, every required device is in the answer.
		if len(known) <= size {
			for _, id := range known {
				if !seen[id] {
					t.Fatalf("required %s missing from %v", id, got)
				}
			}
		}
	})
}
