package ldcache

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLibcmp(t *testing.T) {
	tests := []struct {
		description string
		a, b        string
		want        int
	}{
		{"equal", "libc.so.6", "libc.so.6", 0},
		{"numeric not lexical", "libfoo.so.10", "libfoo.so.9", 1},
		{"numeric less", "libfoo.so.2", "libfoo.so.10", -1},
		{"digit sorts after letter", "lib1", "liba", 1},
		{"letter before digit", "liba", "lib1", -1},
		{"prefix shorter is less", "libfoo.so", "libfoo.so.1", -1},
		{"leading zeros equal", "libx.so.01", "libx.so.1", 0},
		{"plain bytes", "libabc", "libabd", -1},
		{"empty", "", "", 0},
		{"empty vs name", "", "libz.so", -1},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			require.Equal(t, tc.want, Libcmp(tc.a, tc.b))
			require.Equal(t, -tc.want, Libcmp(tc.b, tc.a), "antisymmetry")
		})
	}
}
