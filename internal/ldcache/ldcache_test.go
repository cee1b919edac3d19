package ldcache

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

func TestRoundTrip(t *testing.T) {
	in := []Entry{
		{Name: "libfoo.so.1", Path: "/opt/foo/lib/libfoo.so.1", Flags: FlagELFLibc6 | FlagX8664Lib64},
		{Name: "libfoo.so.10", Path: "/opt/foo/lib/libfoo.so.10", Flags: FlagELFLibc6 | FlagX8664Lib64},
		{Name: "libfoo.so.9", Path: "/opt/foo/lib/libfoo.so.9", Flags: FlagELFLibc6 | FlagX8664Lib64},
		{Name: "libbar.so.1", Path: "/usr/lib/libbar.so.1", Flags: FlagELFLibc6},
		{Name: "libbar.so.1", Path: "/usr/lib64/libbar.so.1", Flags: FlagELFLibc6 | FlagX8664Lib64},
		{Name: "libxpurt.so.1", Path: "/usr/lib/xpu/libxpurt.so.1", Flags: FlagELFLibc6 | FlagX8664Lib64, HWCap: 0x10},
		{Name: "libxpurt.so.1", Path: "/usr/lib/libxpurt.so.1", Flags: FlagELFLibc6 | FlagX8664Lib64},
	}
	data, err := Encode(in)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(data, []byte(magicNew)))
	out, err := Parse(data)
	require.NoError(t, err)
	require.ElementsMatch(t, in, out)
	// ldconfig's order: descending names, 64-bit flags before 32-bit,
	// more hwcap bits first.
	require.Equal(t, []string{
		"/usr/lib/xpu/libxpurt.so.1", "/usr/lib/libxpurt.so.1",
		"/opt/foo/lib/libfoo.so.10", "/opt/foo/lib/libfoo.so.9", "/opt/foo/lib/libfoo.so.1",
		"/usr/lib64/libbar.so.1", "/usr/lib/libbar.so.1",
	}, paths(out))
	again, err := Encode(out)
	require.NoError(t, err)
	require.Equal(t, data, again, "encoding is deterministic")
}

func TestEncodeKeepsInputOrderOfTies(t *testing.T) {
	in := []Entry{
		{Name: "libxpurt.so.1", Path: "/ours/libxpurt.so.1", Flags: 0x303},
		{Name: "libz.so.1", Path: "/usr/lib/libz.so.1", Flags: 0x303},
		{Name: "libxpurt.so.1", Path: "/theirs/libxpurt.so.1", Flags: 0x303},
	}
	data, err := Encode(in)
	require.NoError(t, err)
	out, err := Parse(data)
	require.NoError(t, err)
	require.Equal(t, []string{"/usr/lib/libz.so.1", "/ours/libxpurt.so.1", "/theirs/libxpurt.so.1"}, paths(out))
}

func TestEncodeRejects(t *testing.T) {
	tests := []struct {
		description string
		entry       Entry
		want        string
	}{
		{"empty name", Entry{Path: "/x"}, "empty name"},
		{"empty path", Entry{Name: "libx.so"}, "empty path"},
		{"NUL", Entry{Name: "lib\x00x.so", Path: "/x"}, "NUL"},
		{"hwcaps extension", Entry{Name: "libx.so", Path: "/x", HWCap: HWCapExtension | 1}, "glibc-hwcaps"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			_, err := Encode([]Entry{tc.entry})
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func paths(es []Entry) []string {
	var p []string
	for _, e := range es {
		p = append(p, e.Path)
	}
	return p
}

// encodeOld writes the old format with the new one appended, as ldconfig
// did before glibc 2.32 ("compat" format), or the old format alone.
func encodeOld(t testing.TB, entries []Entry, withNew bool) []byte {
	t.Helper()
	bo := binary.NativeEndian
	oldEnd := oldHeaderSize + len(entries)*oldEntrySize
	var newPart []byte
	pad := 0
	if withNew {
		var err error
		newPart, err = Encode(entries)
		require.NoError(t, err)
		pad = int(alignUp(uint64(oldEnd), cacheAlign)) - oldEnd
	}
	// Old-format strings: a table after the new part, offsets relative to
	// the end of the old entries.
	var strs []byte
	base := pad + len(newPart)
	out := make([]byte, oldEnd)
	copy(out, magicOld)
	bo.PutUint32(out[12:], uint32(len(entries)))
	for i, e := range entries {
		p := out[oldHeaderSize+i*oldEntrySize:]
		bo.PutUint32(p[0:], uint32(e.Flags))
		bo.PutUint32(p[4:], uint32(base+len(strs)))
		strs = append(append(strs, e.Name...), 0)
		bo.PutUint32(p[8:], uint32(base+len(strs)))
		strs = append(append(strs, e.Path...), 0)
	}
	out = append(out, make([]byte, pad)...)
	out = append(out, newPart...)
	return append(out, strs...)
}

func TestParseOldFormats(t *testing.T) {
	in := []Entry{
		{Name: "libfoo.so.1", Path: "/lib/libfoo.so.1", Flags: 0x303},
		{Name: "libbar.so.2", Path: "/lib/libbar.so.2", Flags: 0x3},
		{Name: "libbaz.so.3", Path: "/lib/libbaz.so.3", Flags: 0x303},
	}
	for _, withNew := range []bool{false, true} {
		got, err := Parse(encodeOld(t, in, withNew))
		require.NoError(t, err)
		require.ElementsMatch(t, in, got, "withNew=%v", withNew)
	}
	// In the compat format the new part wins: make the old part differ.
	data := encodeOld(t, in, true)
	bo := binary.NativeEndian
	bo.PutUint32(data[oldHeaderSize:], 0x999) // flags of old entry 0
	got, err := Parse(data)
	require.NoError(t, err)
	require.ElementsMatch(t, in, got)
}

func TestParseHostile(t *testing.T) {
	good, err := Encode([]Entry{{Name: "libfoo.so.1", Path: "/lib/libfoo.so.1", Flags: 0x303}})
	require.NoError(t, err)
	mod := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	bo := binary.NativeEndian
	tests := []struct {
		description string
		data        []byte
		want        string
	}{
		{"empty", nil, "bad magic"},
		{"garbage", []byte("hello world, this is not a cache at all"), "bad magic"},
		{"truncated header", good[:30], "header"},
		{"too many entries", mod(func(b []byte) []byte { bo.PutUint32(b[20:], 1<<30); return b }), "declares 1073741824 entries"},
		{"key past end", mod(func(b []byte) []byte { bo.PutUint32(b[52:], 1<<31); return b }), "past the end"},
		{"value past end", mod(func(b []byte) []byte { bo.PutUint32(b[56:], uint32(len(b))); return b }), "past the end"},
		{"no NUL", mod(func(b []byte) []byte { return b[:len(b)-1] }), "no terminating NUL"},
		{"invalid endian", mod(func(b []byte) []byte { b[28] = endianInvalid; return b }), "byte order invalid"},
		{"old truncated", []byte(magicOld), "old-format header truncated"},
		{"old too many", append([]byte(magicOld+"\x00"), 0xff, 0xff, 0xff, 0x7f), "old format declares"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			_, err := Parse(tc.data)
			require.ErrorIs(t, err, ErrFormat)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

var ldconfigLine = regexp.MustCompile(`^\t(\S+) \(([^)]*)\) => (\S+)$`)

// TestHostCache parses this machine's /etc/ld.so.cache and compares it with
// what ldconfig -p prints, then checks that Encode reproduces ldconfig's
// order of the same entries from a shuffled list.
func TestHostCache(t *testing.T) {
	data, err := os.ReadFile("/etc/ld.so.cache")
	if err != nil {
		testreq.Missing(t, "no host loader cache: %v", err)
	}
	ldconfig, err := exec.LookPath("ldconfig")
	if err != nil {
		ldconfig = "/sbin/ldconfig"
	}
	out, err := exec.Command(ldconfig, "-p").Output()
	if err != nil {
		testreq.Missing(t, "%s -p: %v", ldconfig, err)
	}
	entries, err := Parse(data)
	require.NoError(t, err)
	require.NotEmpty(t, entries)

	var want []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := ldconfigLine.FindStringSubmatch(sc.Text()); m != nil {
			want = append(want, m[1]+" => "+m[3]+" "+archOf(m[2]))
		}
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name+" => "+e.Path+" "+archOfFlags(e.Flags))
	}
	require.Equal(t, want, got, "ldconfig -p lists the file order")

	shuffled := slices.Clone(entries)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	enc, err := Encode(shuffled)
	require.NoError(t, err)
	again, err := Parse(enc)
	require.NoError(t, err)
	key := func(es []Entry) []string {
		var k []string
		for _, e := range es {
			k = append(k, e.Name+" "+archOfFlags(e.Flags))
		}
		return k
	}
	require.Equal(t, key(entries), key(again), "Encode sorts like ldconfig")
}

func archOf(desc string) string {
	return strings.TrimSpace(strings.Split(desc, ",")[len(strings.Split(desc, ","))-1])
}

func archOfFlags(f int32) string {
	switch f & FlagRequiredMask {
	case FlagX8664Lib64:
		return "x86-64"
	case FlagAArch64Lib64:
		return "AArch64"
	case 0:
		return "libc6"
	}
	return "other"
}

func FuzzParse(f *testing.F) {
	good, err := Encode([]Entry{
		{Name: "libfoo.so.1", Path: "/lib/libfoo.so.1", Flags: 0x303},
		{Name: "libbar.so.2", Path: "/lib/libbar.so.2", Flags: 0x3, HWCap: 4},
	})
	require.NoError(f, err)
	f.Add(good)
	f.Add(encodeOld(f, []Entry{{Name: "liba.so.1", Path: "/a", Flags: 3}}, true))
	f.Add(encodeOld(f, []Entry{{Name: "liba.so.1", Path: "/a", Flags: 3}}, false))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := Parse(data)
		if err != nil {
			return
		}
		enc, err := Encode(entries)
		if err != nil {
			return // e.g. empty names or hwcaps entries
		}
		back, err := Parse(enc)
		require.NoError(t, err)
		require.ElementsMatch(t, entries, back)
	})
}
