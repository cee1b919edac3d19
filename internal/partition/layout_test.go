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
	c, err := ParseConfig([]byte("# the node's layout\n\nall=2   # halves\n0000:3b:00.0=4,\n3=0\n"))
	require.NoError(t, err)
	l, err := c.Layout("")
	require.NoError(t, err)
	require.Equal(t, "all=2,0000:3b:00.0=4,3=0", l.String())
	_, err = c.Layout("halves")
	require.ErrorContains(t, err, "no [NAME] sections: drop --name")

	c, err = ParseConfig([]byte("# nothing\n\n   \n"))
	require.NoError(t, err)
	_, err = c.Layout("")
	require.ErrorIs(t, err, ErrNoLayout)
	_, err = ParseConfig([]byte("all=2\nall=x\n"))
	require.ErrorContains(t, err, "line 2:")

	dir := t.TempDir()
	p := filepath.Join(dir, "partitions.conf")
	require.NoError(t, os.WriteFile(p, []byte("all=4\n"), 0o644))
	l, err = ReadConfig(p, "")
	require.NoError(t, err)
	require.Equal(t, "all=4", l.String())
	require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("#", 65<<10)), 0o644))
	_, err = ReadConfig(p, "")
	require.ErrorContains(t, err, "too large")
	_, err = ReadConfig(dir, "")
	require.Error(t, err)
	_, err = ReadConfig(filepath.Join(dir, "none"), "")
	require.Error(t, err)
}

func TestParseConfigNamed(t *testing.T) {
	const file = `# layouts of the fleet
[whole]
all=0
[halves]   # every card in two
all=2
[mixed]
all=2
0000:3b:00.0=4,
`
	c, err := ParseConfig([]byte(file))
	require.NoError(t, err)
	require.Equal(t, []string{"whole", "halves", "mixed"}, c.Names)
	for name, want := range map[string]string{"whole": "all=0", "halves": "all=2", "mixed": "all=2,0000:3b:00.0=4"} {
		l, err := c.Layout(name)
		require.NoError(t, err, name)
		require.Equal(t, want, l.String(), name)
	}
	_, err = c.Layout("")
	require.EqualError(t, err, "the file holds named layouts (whole, halves, mixed): choose one with --name")
	_, err = c.Layout("quarters")
	require.EqualError(t, err, `no layout named "quarters" in the file (it has whole, halves, mixed)`)

	dir := t.TempDir()
	p := filepath.Join(dir, "partitions.conf")
	require.NoError(t, os.WriteFile(p, []byte(file), 0o644))
	l, err := ReadConfig(p, "mixed")
	require.NoError(t, err)
	require.Equal(t, "all=2,0000:3b:00.0=4", l.String())
	_, err = ReadConfig(p, "")
	require.ErrorContains(t, err, p+": the file holds named layouts")

	for _, tc := range []struct{ description, file, err string }{
		{"entries before the first section", "all=2\n[halves]\nall=2\n", "line 2: [halves] follows entries outside any section"},
		{"an empty section", "[halves]\n[whole]\nall=0\n", "line 1: layout [halves] has no entries"},
		{"an empty last section", "[whole]\nall=0\n[halves]\n", "line 3: layout [halves] has no entries"},
		{"a repeated section", "[a]\nall=0\n[a]\nall=2\n", "line 3: layout [a] already defined on line 1"},
		{"an unclosed section", "[a\nall=0\n", `line 1: "[a": a section line is [NAME]`},
		{"a name with a slash", "[a/b]\nall=0\n", `line 1: layout name "a/b"`},
		{"a name starting with a dash", "[-a]\nall=0\n", `line 1: layout name "-a"`},
		{"an empty name", "[]\nall=0\n", `line 1: layout name ""`},
		{"a long name", "[" + strings.Repeat("a", 64) + "]\nall=0\n", "1 to 63 characters"},
		{"a bad entry in a section", "[a]\nall=0\n[b]\nall=x\n", "line 4:"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.file))
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestFormatConfig(t *testing.T) {
	l, err := ParseLayout("all=2,0000:3b:00.0=4")
	require.NoError(t, err)
	for _, name := range []string{"", "current"} {
		s, err := FormatConfig(l, name)
		require.NoError(t, err)
		c, err := ParseConfig([]byte(s))
		require.NoError(t, err)
		back, err := c.Layout(name)
		require.NoError(t, err)
		require.Equal(t, l, back, "the export reads back as the same layout")
	}
	_, err = FormatConfig(l, "a b")
	require.ErrorContains(t, err, `layout name "a b"`)
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{"all=2\n", "[a]\nall=2\n[b]\n0=4,1=0\n", "# x\n", "[a\n", "all=2\n[a]\nall=0\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		// Every layout the file holds formats and reads back the same.
		names := append([]string{""}, c.Names...)
		for _, name := range names {
			l, err := c.Layout(name)
			if err != nil {
				continue
			}
			s, err := FormatConfig(l, name)
			require.NoError(t, err)
			back, err := ParseConfig([]byte(s))
			require.NoError(t, err, s)
			got, err := back.Layout(name)
			require.NoError(t, err, s)
			require.Equal(t, l, got)
		}
	})
}
