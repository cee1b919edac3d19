package ldcache

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// Encode writes entries in the new cache format ("glibc-ld.so.cache1.1") in
// the byte order of this machine, sorted the way ldconfig sorts them (the
// loader binary-searches the table). Entries equal under that order keep
// their relative input order; the loader takes the first usable one.
func Encode(entries []Entry) ([]byte, error) {
	for i, e := range entries {
		switch {
		case e.Name == "":
			return nil, fmt.Errorf("entry %d (path %q): empty name", i, e.Path)
		case e.Path == "":
			return nil, fmt.Errorf("entry %d (name %q): empty path", i, e.Name)
		case strings.IndexByte(e.Name, 0) >= 0 || strings.IndexByte(e.Path, 0) >= 0:
			return nil, fmt.Errorf("entry %d (name %q): NUL byte in name or path", i, e.Name)
		case e.HWCap&HWCapExtension != 0:
			return nil, fmt.Errorf("entry %d (name %q, path %q): glibc-hwcaps extension entries are not supported", i, e.Name, e.Path)
		}
	}
	sorted := slices.Clone(entries)
	Sort(sorted)

	// String table: each distinct string once, offsets relative to the
	// start of the file (the new header).
	strBase := uint64(newHeaderSize + len(sorted)*newEntrySize)
	offsets := make(map[string]uint32, 2*len(sorted))
	var table []byte
	offsetOf := func(s string) (uint32, error) {
		if off, ok := offsets[s]; ok {
			return off, nil
		}
		off := strBase + uint64(len(table))
		if off > 1<<32-1 {
			return 0, fmt.Errorf("string table larger than 4 GiB")
		}
		offsets[s] = uint32(off)
		table = append(table, s...)
		table = append(table, 0)
		return uint32(off), nil
	}

	bo := binary.NativeEndian
	out := make([]byte, strBase, int(strBase)+64*len(sorted))
	copy(out, magicNew)
	bo.PutUint32(out[20:], uint32(len(sorted)))
	out[28] = nativeEndianFlag()
	for i, e := range sorted {
		key, err := offsetOf(e.Name)
		if err != nil {
			return nil, err
		}
		value, err := offsetOf(e.Path)
		if err != nil {
			return nil, err
		}
		p := out[newHeaderSize+i*newEntrySize:]
		bo.PutUint32(p[0:], uint32(e.Flags))
		bo.PutUint32(p[4:], key)
		bo.PutUint32(p[8:], value)
		bo.PutUint64(p[16:], e.HWCap)
	}
	bo.PutUint32(out[24:], uint32(len(table)))
	return append(out, table...), nil
}

// Sort puts entries in the order Encode writes them (ldconfig's order),
// keeping the input order of entries that compare equal.
func Sort(entries []Entry) { slices.SortStableFunc(entries, compare) }

func nativeEndianFlag() byte {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], 1)
	if b[0] == 1 {
		return endianLittle
	}
	return endianBig
}

// compare is ldconfig's compare() in cache.c, as a sort.Less-style function
// giving the order of the table: descending by name, then flags, then the
// number of hwcap bits and the hwcap value.
func compare(a, b Entry) int {
	if c := Libcmp(b.Name, a.Name); c != 0 {
		return c
	}
	if a.Flags != b.Flags {
		if a.Flags < b.Flags {
			return 1
		}
		return -1
	}
	if ba, bb := popcount(a.HWCap), popcount(b.HWCap); ba != bb {
		if bb > ba {
			return 1
		}
		return -1
	}
	if a.HWCap != b.HWCap {
		if b.HWCap > a.HWCap {
			return 1
		}
		return -1
	}
	return 0
}

func popcount(v uint64) int {
	n := 0
	for ; v != 0; v &= v - 1 {
		n++
	}
	return n
}
