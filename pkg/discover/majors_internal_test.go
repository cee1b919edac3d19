package discover

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDriverMajors(t *testing.T) {
	for _, tc := range []struct {
		description, data string
		want              []uint32
	}{
		{"4.x", "Character devices:\n  1 mem\n 10 misc\n243 xpu\n\nBlock devices:\n  7 loop\n", []uint32{243}},
		{"two registrations, one twice", "Character devices:\n195 xpu\n240 xpu\n195 xpu\n", []uint32{195, 240}},
		{"a block device named xpu is not a char major", "Character devices:\n 10 misc\nBlock devices:\n243 xpu\n", nil},
		{"no header: nothing", "243 xpu\n", nil},
		{"other names and junk", "Character devices:\n243 kunlun\nx xpu\n-1 xpu\n99999999999 xpu\n243 xpu extra\n", nil},
		{"empty", "", nil},
	} {
		t.Run(tc.description, func(t *testing.T) {
			require.Equal(t, tc.want, driverMajors([]byte(tc.data)))
		})
	}
}

func FuzzDriverMajors(f *testing.F) {
	f.Add([]byte("Character devices:\n243 xpu\nBlock devices:\n  8 sd\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := driverMajors(data)
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != len(got) {
			t.Fatalf("duplicates in %v", got)
		}
	})
}
