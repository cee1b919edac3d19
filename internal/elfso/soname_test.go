package elfso

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// debugELF is the reference the reader replaced: debug/elf's first
// DT_SONAME of an ET_DYN file, and the flags computed from its header.
func debugELF(r io.ReaderAt) (string, int32, bool) {
	f, err := elf.NewFile(r)
	if err != nil || f.Type != elf.ET_DYN {
		return "", 0, false
	}
	names, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(names) == 0 || names[0] == "" {
		return "", 0, false
	}
	off := int64(0x24)
	if f.Class == elf.ELFCLASS64 {
		off = 0x30
	}
	var eflags [4]byte
	if _, err := r.ReadAt(eflags[:], off); err != nil {
		return "", 0, false
	}
	return names[0], cacheFlags(f.Class, f.Machine, f.ByteOrder.Uint32(eflags[:])), true
}

// hostELFFiles lists the shared objects of the host's library directories
// (each directory once, though /lib may be /usr/lib) and the Go tools,
// executables the reader must refuse as debug/elf does.
func hostELFFiles() []string {
	var files []string
	seen := map[string]bool{}
	for _, pattern := range []string{
		"/lib/x86_64-linux-gnu/*.so*", "/usr/lib/x86_64-linux-gnu/*.so*", "/lib64/*.so*", "/usr/lib64/*.so*",
		"/lib/aarch64-linux-gnu/*.so*", "/usr/lib/aarch64-linux-gnu/*.so*", "/usr/local/go/pkg/tool/*/*",
	} {
		dirs, _ := filepath.Glob(filepath.Dir(pattern))
		for _, dir := range dirs {
			real, err := filepath.EvalSymlinks(dir)
			if err != nil || seen[filepath.Join(real, filepath.Base(pattern))] {
				continue
			}
			seen[filepath.Join(real, filepath.Base(pattern))] = true
			m, _ := filepath.Glob(filepath.Join(dir, filepath.Base(pattern)))
			files = append(files, m...)
		}
	}
	return files
}

// TestSonameReaderMatchesDebugELF compares the reader with debug/elf on the
// shared objects and executables of the host and on a library built here,
// reading them as files with one reader, as the scans do.
func TestSonameReaderMatchesDebugELF(t *testing.T) {
	built := filepath.Join(t.TempDir(), "libbuilt.so.3")
	buildLib(t, built, "libbuilt.so.3", "f", "x")
	files := append(hostELFFiles(), built)
	var sr SonameReader
	checked, refused := 0, 0
	for _, p := range files {
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > 256<<20 {
			continue
		}
		f, err := os.Open(p)
		require.NoError(t, err)
		want, wantFlags, ok := debugELF(f)
		got, gotFlags, err := sr.Read(f)
		require.NoError(t, f.Close())
		if !ok {
			require.Error(t, err, "%s: debug/elf finds no SONAME, the reader found %q", p, got)
			refused++
			continue
		}
		require.NoError(t, err, p)
		require.Equal(t, want, got, p)
		require.Equal(t, wantFlags, gotFlags, p)
		checked++
	}
	require.NotZero(t, checked)
	t.Logf("%d shared objects compared, %d files without a SONAME refused by both", checked, refused)
}

// dynamicEntries returns the file offset of the entries of the PT_DYNAMIC
// segment of a little-endian ELF64 file, and their number.
func dynamicEntries(t *testing.T, data []byte) (int, int) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	require.NoError(t, err)
	require.Equal(t, elf.ELFCLASS64, f.Class)
	for _, p := range f.Progs {
		if p.Type == elf.PT_DYNAMIC {
			return int(p.Off), int(p.Filesz / 16)
		}
	}
	t.Fatal("no PT_DYNAMIC")
	return 0, 0
}

// editDyn calls edit with the tag and value of each dynamic entry of data
// up to DT_NULL, and stores what it returns.
func editDyn(t *testing.T, data []byte, edit func(tag elf.DynTag, val uint64) (elf.DynTag, uint64)) []byte {
	t.Helper()
	off, n := dynamicEntries(t, data)
	for i := range n {
		e := data[off+16*i:]
		tag := elf.DynTag(binary.LittleEndian.Uint64(e))
		if tag == elf.DT_NULL {
			break
		}
		tag, val := edit(tag, binary.LittleEndian.Uint64(e[8:]))
		binary.LittleEndian.PutUint64(e, uint64(tag))
		binary.LittleEndian.PutUint64(e[8:], val)
	}
	return data
}

// dynValue returns the value of the first dynamic entry tag of data.
func dynValue(t *testing.T, data []byte, tag elf.DynTag) uint64 {
	t.Helper()
	var v uint64
	found := false
	editDyn(t, bytes.Clone(data), func(tg elf.DynTag, val uint64) (elf.DynTag, uint64) {
		if tg == tag && !found {
			v, found = val, true
		}
		return tg, val
	})
	require.True(t, found, "no %v", tag)
	return v
}

func TestSonameReaderRejects(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libx.so.1")
	buildLib(t, lib, "libx.so.1", "f", "x")
	good, err := os.ReadFile(lib)
	require.NoError(t, err)
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	setDyn := func(tag elf.DynTag, v uint64) []byte {
		return editDyn(t, bytes.Clone(good), func(tg elf.DynTag, val uint64) (elf.DynTag, uint64) {
			if tg == tag {
				return tg, v
			}
			return tg, val
		})
	}
	soname, strsz := dynValue(t, good, elf.DT_SONAME), dynValue(t, good, elf.DT_STRSZ)
	for _, tc := range []struct {
		description string
		data        []byte
		noSoname    bool // errors.Is(err, errNoSoname)
	}{
		{description: "empty", data: nil},
		{description: "not ELF", data: []byte("#!/bin/sh\necho hello, this is long enough to hold a header\n")},
		{description: "truncated header", data: good[:40]},
		{description: "executable", data: edit(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[16:], uint16(elf.ET_EXEC)); return b })},
		{description: "bad class", data: edit(func(b []byte) []byte { b[elf.EI_CLASS] = 9; return b })},
		{description: "bad byte order", data: edit(func(b []byte) []byte { b[elf.EI_DATA] = 9; return b })},
		{description: "no program headers", data: edit(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[56:], 0); return b })},
		{description: "program headers past the end", data: edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[32:], 1<<40); return b })},
		{description: "program headers at the end of the offsets", data: edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[32:], 1<<63); return b })},
		{description: "huge program header table", data: edit(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[56:], 0xffff); return b })},
		{description: "small program header entries", data: edit(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[54:], 8); return b })},
		{description: "truncated file", data: good[:len(good)/8]},
		{description: "truncated dynamic segment", data: good[:dynEnd(t, good)-1]},
		{description: "no PT_DYNAMIC", noSoname: true, data: edit(func(b []byte) []byte {
			f, err := elf.NewFile(bytes.NewReader(b))
			require.NoError(t, err)
			for i, p := range f.Progs {
				if p.Type == elf.PT_DYNAMIC {
					binary.LittleEndian.PutUint32(b[int(binary.LittleEndian.Uint64(b[32:]))+56*i:], uint32(elf.PT_NULL))
				}
			}
			return b
		})},
		{description: "no DT_SONAME", noSoname: true, data: setDynTag(t, good, elf.DT_SONAME, elf.DT_DEBUG)},
		{description: "empty SONAME", noSoname: true, data: setDyn(elf.DT_SONAME, 0)},
		{description: "SONAME past DT_STRSZ", data: setDyn(elf.DT_SONAME, strsz)},
		{description: "SONAME not terminated within DT_STRSZ", noSoname: true, data: setDyn(elf.DT_STRSZ, soname+3)},
		{description: "no DT_STRTAB", data: setDynTag(t, good, elf.DT_STRTAB, elf.DT_DEBUG)},
		{description: "string table outside the loaded segments", data: setDyn(elf.DT_STRTAB, 1<<50)},
		{description: "huge dynamic segment", data: edit(func(b []byte) []byte {
			f, err := elf.NewFile(bytes.NewReader(b))
			require.NoError(t, err)
			for i, p := range f.Progs {
				if p.Type == elf.PT_DYNAMIC {
					binary.LittleEndian.PutUint64(b[int(binary.LittleEndian.Uint64(b[32:]))+56*i+32:], maxDynBytes+1)
				}
			}
			return b
		})},
	} {
		t.Run(tc.description, func(t *testing.T) {
			var sr SonameReader
			got, _, err := sr.Read(bytes.NewReader(tc.data))
			require.Error(t, err, "read %q", got)
			if tc.noSoname {
				require.ErrorIs(t, err, errNoSoname)
			}
			// The reader's buffers hold nothing of the refused file.
			got, _, err = sr.Read(bytes.NewReader(good))
			require.NoError(t, err)
			require.Equal(t, "libx.so.1", got)
		})
	}
}

// dynEnd returns the end offset of the PT_DYNAMIC segment of data.
func dynEnd(t *testing.T, data []byte) int {
	t.Helper()
	off, n := dynamicEntries(t, data)
	return off + 16*n
}

// setDynTag returns a copy of data with the dynamic entries tagged from
// tagged to instead.
func setDynTag(t *testing.T, data []byte, from, to elf.DynTag) []byte {
	t.Helper()
	return editDyn(t, bytes.Clone(data), func(tag elf.DynTag, val uint64) (elf.DynTag, uint64) {
		if tag == from {
			return to, val
		}
		return tag, val
	})
}

// TestSonameReaderRepeatedSoname: where DT_SONAME repeats, the last one
// counts, as for ldconfig and the loader (debug/elf returns the first).
func TestSonameReaderRepeatedSoname(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libx.so.1")
	buildLib(t, lib, "libx.so.1", "f", "x")
	good, err := os.ReadFile(lib)
	require.NoError(t, err)
	soname := dynValue(t, good, elf.DT_SONAME)
	after, replaced := false, false
	data := editDyn(t, bytes.Clone(good), func(tag elf.DynTag, val uint64) (elf.DynTag, uint64) {
		switch {
		case tag == elf.DT_SONAME:
			after = true
		case after && !replaced && tag != elf.DT_STRTAB && tag != elf.DT_STRSZ:
			replaced = true
			return elf.DT_SONAME, soname + 3 // "libx.so.1"[3:]
		}
		return tag, val
	})
	require.True(t, replaced, "no dynamic entry after DT_SONAME to replace")
	var sr SonameReader
	got, _, err := sr.Read(bytes.NewReader(data))
	require.NoError(t, err)
	require.Equal(t, "x.so.1", got)
	first, _, ok := debugELF(bytes.NewReader(data))
	require.True(t, ok)
	require.Equal(t, "libx.so.1", first, "debug/elf's answer changed")
}

// FuzzSonameReader checks that no input makes the reader panic, return an
// empty SONAME, disagree with debug/elf on the flags of a file both read,
// or answer differently with buffers used by another file.
//
// The seeds are small, so that the fuzzer mutates (and minimizes) them
// quickly: a library built here, read whole, and the first 16 KiB of host
// libraries (their headers and program headers).
func FuzzSonameReader(f *testing.F) {
	lib := filepath.Join(f.TempDir(), "libseed.so.2")
	buildLib(f, lib, "libseed.so.2", "f", "x")
	seed, err := os.ReadFile(lib)
	require.NoError(f, err)
	f.Add(seed)
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libz.so.1"} {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data[:min(len(data), 16<<10)])
		}
	}
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var sr SonameReader
		got, flags, err := sr.Read(bytes.NewReader(data))
		_, _, _ = sr.Read(bytes.NewReader(seed))
		again, againFlags, againErr := sr.Read(bytes.NewReader(data))
		require.Equal(t, fmt.Sprint(err), fmt.Sprint(againErr))
		require.Equal(t, got, again)
		require.Equal(t, flags, againFlags)
		if err != nil {
			return
		}
		require.NotEmpty(t, got)
		require.NotContains(t, got, "\x00")
		if want, wantFlags, ok := debugELF(bytes.NewReader(data)); ok {
			require.Equal(t, wantFlags, flags)
			if want != got {
				// The two may differ on hostile files (repeated DT_SONAME,
				// sections that contradict the segments); not on one SONAME
				// the file's .dynamic section and PT_DYNAMIC agree on.
				t.Logf("debug/elf %q, reader %q", want, got)
			}
		}
	})
}
