package discover

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDriverDevicesLine(t *testing.T) {
	for _, tc := range []struct {
		description string
		data        string
		want        string
	}{
		{description: "4.x", data: "Character devices:\n  1 mem\n243 xpu\n\nBlock devices:\n  7 loop\n", want: "243 xpu"},
		{description: "kunlun name", data: "Character devices:\n195 kunlun\n", want: "195 kunlun"},
		{description: "no driver", data: "Character devices:\n  1 mem\n226 drm\n"},
		{description: "name only", data: "xpu\n"},
		{description: "not a major", data: "x1 xpu\n"},
		{description: "longer name", data: "195 xpu-other\n"},
		{description: "empty", data: ""},
	} {
		t.Run(tc.description, func(t *testing.T) {
			got, ok := driverDevicesLine([]byte(tc.data))
			require.Equal(t, tc.want != "", ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzDriverDevicesLine(f *testing.F) {
	f.Add([]byte("Character devices:\n243 xpu\n"))
	f.Add([]byte("195 kunlun\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		line, ok := driverDevicesLine(data)
		if !ok {
			if line != "" {
				t.Fatalf("no match but line %q", line)
			}
			return
		}
		if f := strings.Fields(line); len(f) != 2 || (f[1] != "kunlun" && f[1] != "xpu") {
			t.Fatalf("match %q is not a kunlun or xpu line", line)
		}
		if !strings.Contains(string(data), line) {
			t.Fatalf("match %q is not in the input", line)
		}
	})
}

func TestParseMainMemory(t *testing.T) {
	for _, tc := range []struct {
		description, in string
		want            int64
	}{
		{"kunlun2", "L3: 0 / 63 MB\nMAIN: 0 / 16384 MB\n", 16384},
		{"tabs", "L3:\t0 / 63 MB\nMAIN:\t512 / 98304 MB\n", 98304},
		{"no main", "L3: 0 / 63 MB\n", 0},
		{"other unit", "MAIN: 0 / 16 GB\n", 0},
		{"garbage", "MAIN: lots\n", 0},
		{"negative", "MAIN: 0 / -5 MB\n", 0},
	} {
		t.Run(tc.description, func(t *testing.T) {
			if got := parseMainMemory([]byte(tc.in)); got != tc.want {
				t.Errorf("parseMainMemory(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}
