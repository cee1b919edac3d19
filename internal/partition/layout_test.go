package partition

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseLayout(t *testing.T) {
	tests := []struct {
		description string
		in          string
		want        Layout
		wantErr     string
	}{
		{"all", "all=2", Layout{{SelectorAll, 2}}, ""},
		{"later entries win, spaces", " all=2 , 0000:3B:00.0=4,3=0", Layout{{SelectorAll, 2}, {"0000:3b:00.0", 4}, {"3", 0}}, ""},
		{"empty", "  ", nil, "empty layout"},
		{"no count", "all", nil, `"all" is not SELECTOR=N`},
		{"negative", "all=-1", nil, "not a number of VFs"},
		{"too many", "all=257", nil, "not a number of VFs"},
		{"plus sign", "all=+2", nil, "not a number of VFs"},
		{"bad selector", "xpu0=2", nil, `selector "xpu0" is neither`},
		{"short address", "3b:00.0=2", nil, `selector "3b:00.0" is neither`},
		{"empty entry", "all=2,", nil, "is not SELECTOR=N"},
		{"empty selector", "=2", nil, "empty selector"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			got, err := ParseLayout(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			again, err := ParseLayout(got.String())
			require.NoError(t, err)
			require.Equal(t, got, again)
		})
	}
}

func TestLabelValue(t *testing.T) {
	l, err := ParseLayout("all=2,0000:3b:00.0=4,3=0")
	require.NoError(t, err)
	v, err := l.LabelValue()
	require.NoError(t, err)
	require.Equal(t, "all-2_0000.3b.00.0-4_3-0", v)
	back, err := ParseLabelValue(v)
	require.NoError(t, err)
	require.Equal(t, l, back)

	long := make(Layout, 8)
	for i := range long {
		long[i] = Entry{Selector: "0000:3b:00.0", VFs: 4}
	}
	_, err = long.LabelValue()
	require.ErrorContains(t, err, "more than a label value's 63")

	for _, bad := range []string{"", "all", "all=2", "all-x", "0000.3b.00-2", strings.Repeat("a", 64)} {
		_, err := ParseLabelValue(bad)
		require.Error(t, err, bad)
	}
}

func FuzzParseLayout(f *testing.F) {
	for _, s := range []string{"all=2", "all=2,0000:3b:00.0=4", "3=0", "=", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLayout(s)
		if err != nil {
			return
		}
		again, err := ParseLayout(l.String())
		if err != nil {
			t.Fatalf("%q -> %q: %v", s, l, err)
		}
		require.Equal(t, l, again)
		if v, err := l.LabelValue(); err == nil {
			back, err := ParseLabelValue(v)
			require.NoError(t, err, v)
			require.Equal(t, l, back)
		}
	})
}

func TestParseConfig(t *testing.T) {
	l, err := ParseConfig([]byte("# the node's layout\n\nall=2   # halves\n0000:3b:00.0=4,\n3=0\n"))
	require.NoError(t, err)
	require.Equal(t, "all=2,0000:3b:00.0=4,3=0", l.String())

	_, err = ParseConfig([]byte("# nothing\n\n   \n"))
	require.ErrorIs(t, err, ErrNoLayout)
	_, err = ParseConfig([]byte("all=2\nall=x\n"))
	require.ErrorContains(t, err, "line 2:")

	dir := t.TempDir()
	p := filepath.Join(dir, "partitions.conf")
	require.NoError(t, os.WriteFile(p, []byte("all=4\n"), 0o644))
	l, err = ReadConfig(p)
	require.NoError(t, err)
	require.Equal(t, "all=4", l.String())
	require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("#", 65<<10)), 0o644))
	_, err = ReadConfig(p)
	require.ErrorContains(t, err, "too large")
	_, err = ReadConfig(dir)
	require.Error(t, err)
	_, err = ReadConfig(filepath.Join(dir, "none"))
	require.Error(t, err)
}
