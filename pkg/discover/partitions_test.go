package discover

import "testing"

func TestPartitionModels(t *testing.T) {
	p800, ok := PartitionModelOf("P800")
	if !ok || !p800.Allows(0) || !p800.Allows(2) || !p800.Allows(4) || p800.Allows(1) || p800.Allows(3) {
		t.Fatalf("P800 layouts: %+v", p800)
	}
	for _, m := range partitionModels {
		for _, n := range m.VFCounts {
			if m.VFMemoryMiB[n] <= 0 {
				t.Errorf("%s: %d VFs have no size", m.Board, n)
			}
		}
	}
	if _, ok := PartitionModelOf("K200"); ok {
		t.Error("K200 has no public partitions")
	}
	if HandleLimit(GenerationKunlun3) != 32 || HandleLimit(GenerationKunlun2) != 0 {
		t.Error("handle limits")
	}
}

func TestVFCount(t *testing.T) {
	for in, want := range map[string]int{"2\n": 2, "0": 0, "-5\n": 0, "65536": 0, "65535": 65535, "x": 0, "": 0} {
		if got := vfCount([]byte(in)); got != want {
			t.Errorf("vfCount(%q) = %d, want %d", in, got, want)
		}
	}
}
