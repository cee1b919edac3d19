package ldcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// ErrFormat is wrapped by every error Parse returns for malformed input.
var ErrFormat = errors.New("malformed ld.so.cache")

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
}

// ErrTooManyEntries is wrapped by ParseMax's error for a cache that
// declares more entries than allowed.
var ErrTooManyEntries = errors.New("ld.so.cache has too many entries")

// Parse decodes an ld.so.cache. It accepts the old format with the new one
// appended (the new part is then used, as the loader does), the old format
// alone, and the new format alone. Entries are returned in file order.
func Parse(data []byte) ([]Entry, error) { return ParseMax(data, -1) }

// ParseMax is Parse for a cache somebody else controls: a cache declaring
// more than maxEntries entries (none if negative) is refused with
// ErrTooManyEntries before anything is allocated for them.
func ParseMax(data []byte, maxEntries int) ([]Entry, error) {
	check := func(part string, n uint64) error {
		if maxEntries >= 0 && n > uint64(maxEntries) {
			return fmt.Errorf("%w: the %s format part declares %d, at most %d are read", ErrTooManyEntries, part, n, maxEntries)
		}
		return nil
	}
	switch {
	case bytes.HasPrefix(data, []byte(magicNew)):
		return parseNew(data, 0, check)
	case bytes.HasPrefix(data, []byte(magicOld)):
		if len(data) < oldHeaderSize {
			return nil, formatErr("old-format header truncated: %d bytes, need %d", len(data), oldHeaderSize)
		}
		nlibs := uint64(binary.NativeEndian.Uint32(data[12:16]))
		end := uint64(oldHeaderSize) + nlibs*oldEntrySize
		if end > uint64(len(data)) {
			return nil, formatErr("old format declares %d entries (%d bytes) but the file has %d bytes", nlibs, end, len(data))
		}
		newOff := alignUp(end, cacheAlign)
		if newOff+uint64(len(magicNew)) <= uint64(len(data)) && bytes.HasPrefix(data[newOff:], []byte(magicNew)) {
			return parseNew(data, newOff, check)
		}
		if err := check("old", nlibs); err != nil {
			return nil, err
		}
		return parseOld(data, int(nlibs), end)
	default:
		n := min(len(data), len(magicNew))
		return nil, formatErr("bad magic %q: neither %q nor %q", data[:n], magicOld, magicNew)
	}
}

func alignUp(v, a uint64) uint64 { return (v + a - 1) &^ (a - 1) }

func parseOld(data []byte, nlibs int, strBase uint64) ([]Entry, error) {
	entries := make([]Entry, 0, nlibs)
	str := string(data) // one copy; the entries' strings are slices of it
	bo := binary.NativeEndian
	for i := range nlibs {
		e := data[oldHeaderSize+i*oldEntrySize:]
		key, err := cString(str, strBase, bo.Uint32(e[4:8]))
		if err != nil {
			return nil, fmt.Errorf("old-format entry %d key: %w", i, err)
		}
		value, err := cString(str, strBase, bo.Uint32(e[8:12]))
		if err != nil {
			return nil, fmt.Errorf("old-format entry %d value: %w", i, err)
		}
		entries = append(entries, Entry{Name: key, Path: value, Flags: int32(bo.Uint32(e[0:4]))})
	}
	return entries, nil
}

func parseNew(data []byte, base uint64, check func(string, uint64) error) ([]Entry, error) {
	if uint64(len(data))-base < newHeaderSize {
		return nil, formatErr("new-format header at offset %d truncated: %d bytes left, need %d", base, uint64(len(data))-base, newHeaderSize)
	}
	h := data[base:]
	var bo binary.ByteOrder
	switch h[28] & endianMask {
	case endianUnset:
		bo = binary.NativeEndian
	case endianLittle:
		bo = binary.LittleEndian
	case endianBig:
		bo = binary.BigEndian
	default:
		return nil, formatErr("new-format header marks its byte order invalid (flags %#x)", h[28])
	}
	nlibs := uint64(bo.Uint32(h[20:24]))
	end := newHeaderSize + nlibs*newEntrySize
	if end > uint64(len(h)) {
		return nil, formatErr("new format declares %d entries (%d bytes) but only %d bytes follow its header offset %d", nlibs, end, len(h), base)
	}
	if err := check("new", nlibs); err != nil {
		return nil, err
	}
	entries := make([]Entry, 0, nlibs)
	// One copy of the file as a string; the entries' strings are slices of
	// it (a string per name and path was most of Parse's allocations).
	str := string(data)
	for i := range nlibs {
		e := h[newHeaderSize+i*newEntrySize:]
		key, err := cString(str, base, bo.Uint32(e[4:8]))
		if err != nil {
			return nil, fmt.Errorf("entry %d key: %w", i, err)
		}
		value, err := cString(str, base, bo.Uint32(e[8:12]))
		if err != nil {
			return nil, fmt.Errorf("entry %d value: %w", i, err)
		}
		entries = append(entries, Entry{
			Name:  key,
			Path:  value,
			Flags: int32(bo.Uint32(e[0:4])),
			HWCap: bo.Uint64(e[16:24]),
		})
	}
	return entries, nil
}

// cString returns the NUL-terminated string at base+off in data.
func cString(data string, base uint64, off uint32) (string, error) {
	start := base + uint64(off)
	if start >= uint64(len(data)) {
		return "", formatErr("string offset %d (+%d) is past the end of the %d-byte file", off, base, len(data))
	}
	rest := data[start:]
	if len(rest) > maxStringLength {
		rest = rest[:maxStringLength]
	}
	n := strings.IndexByte(rest, 0)
	if n < 0 {
		return "", formatErr("string at offset %d has no terminating NUL within %d bytes", start, len(rest))
	}
	return rest[:n], nil
}
