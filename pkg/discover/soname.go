package discover

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Bounds for what readSoname reads of a file: a real shared object has a
// dozen program headers and a few dozen dynamic entries.
const (
	maxPhdrBytes   = 64 << 10
	maxDynBytes    = 1 << 20
	maxSonameBytes = 4096
)

// errNoSoname is returned for an ELF shared object without DT_SONAME.
var errNoSoname = errors.New("no SONAME")

// elfReader is an open file readSoname reads with preads.
type elfReader interface {
	io.ReaderAt
	io.Closer
}

// readSoname returns the DT_SONAME of an ELF shared object. It reads only
// the ELF header, the program headers, the dynamic segment and the one
// string: debug/elf.Open parses every section header and string table,
// which on an XRE with hundreds of libraries was most of discovery's time.
// The result is the same as debug/elf's DynString(DT_SONAME) (tested
// against the host's libraries).
func readSoname(path string) (string, error) {
	f, err := openELF(path)
	if err != nil {
		return "", err
	}
	return new(sonameReader).readFile(f, path)
}

// sonameOf returns the DT_SONAME of the ELF shared object r.
func sonameOf(r io.ReaderAt) (string, error) {
	return new(sonameReader).sonameOf(r)
}

// sonameReader reads the SONAMEs of many files with the same buffers: an
// XRE directory has hundreds of libraries, and allocating every file's
// prefix, program headers and dynamic segment anew was a third of the
// directory scan's time (and, in `generate`, the garbage that started a GC
// cycle). It is not safe for concurrent use.
type sonameReader struct {
	pr      prefixReader
	prefix  [prefixSize]byte
	scratch []byte
	loads   []segment
}

// readFile returns the SONAME of f (opened from path, which errors name)
// and closes f.
func (s *sonameReader) readFile(f elfReader, path string) (string, error) {
	defer func() { _ = f.Close() }() // read-only
	s.pr.fill(f, s.prefix[:])
	soname, err := s.sonameOf(&s.pr)
	s.pr = prefixReader{}
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return soname, nil
}

// prefixReader serves reads from the first bytes of a file, read once:
// the ELF header and the program headers lie there, and for small
// libraries everything readSoname needs does.
type prefixReader struct {
	r      io.ReaderAt
	prefix []byte
	eof    bool
}

const prefixSize = 2 << 10

// fill reads the prefix of r into buf.
func (p *prefixReader) fill(r io.ReaderAt, buf []byte) {
	n, err := r.ReadAt(buf, 0)
	*p = prefixReader{r: r, prefix: buf[:n], eof: err != nil}
}

// view returns the len bytes at off when the prefix serves them (short,
// with io.EOF, where the prefix ends at the end of the file), like ReadAt
// without the copy.
func (p *prefixReader) view(off int64, n int) ([]byte, bool, error) {
	if off >= 0 && off < int64(len(p.prefix)) && (off+int64(n) <= int64(len(p.prefix)) || p.eof) {
		b := p.prefix[off:min(off+int64(n), int64(len(p.prefix)))]
		if len(b) < n {
			return b, true, io.EOF
		}
		return b, true, nil
	}
	return nil, false, nil
}

func (p *prefixReader) ReadAt(b []byte, off int64) (int, error) {
	if v, ok, err := p.view(off, len(b)); ok {
		return copy(b, v), err
	}
	return p.r.ReadAt(b, off)
}

// readAt is r.ReadAt(make([]byte, n), off) without the allocation: a view
// of the prefix when r is the prefix reader and holds the bytes, else the
// bytes read into the reused scratch buffer (valid until the next call).
func (s *sonameReader) readAt(r io.ReaderAt, off int64, n int) ([]byte, error) {
	if r == &s.pr {
		if v, ok, err := s.pr.view(off, n); ok {
			return v, err
		}
	}
	if cap(s.scratch) < n {
		s.scratch = make([]byte, n)
	}
	b := s.scratch[:n]
	read, err := r.ReadAt(b, off)
	return b[:read], err
}

// readFull is binary.Read's io.ReadFull of n bytes at off.
func (s *sonameReader) readFull(r io.ReaderAt, off int64, n int) ([]byte, error) {
	b, err := s.readAt(r, off, n)
	switch {
	case len(b) == n:
		return b, nil
	case len(b) > 0 && errors.Is(err, io.EOF):
		return nil, io.ErrUnexpectedEOF
	case err == nil:
		return nil, io.ErrUnexpectedEOF
	}
	return nil, err
}

// endian reads the fields of an ELF file in its byte order. A concrete
// type, so that the calls inline: binary.ByteOrder's interface calls were
// half of sonameOf's own instructions.
type endian struct{ big bool }

func (e endian) Uint16(b []byte) uint16 {
	if e.big {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func (e endian) Uint32(b []byte) uint32 {
	if e.big {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

func (e endian) Uint64(b []byte) uint64 {
	if e.big {
		return binary.BigEndian.Uint64(b)
	}
	return binary.LittleEndian.Uint64(b)
}

type segment struct{ typ, off, vaddr, filesz uint64 }

// Sizes of the ELF file headers (elf.Header32 and elf.Header64).
const (
	header32Size = 52
	header64Size = 64
)

func (s *sonameReader) sonameOf(r io.ReaderAt) (string, error) {
	ident, err := s.readAt(r, 0, elf.EI_NIDENT)
	if err != nil {
		return "", fmt.Errorf("not an ELF file: %w", err)
	}
	if !bytes.Equal(ident[:4], []byte(elf.ELFMAG)) {
		return "", errors.New("not an ELF file")
	}
	var bo endian
	switch elf.Data(ident[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
	case elf.ELFDATA2MSB:
		bo.big = true
	default:
		return "", errors.New("unknown ELF byte order")
	}
	is64 := false
	switch elf.Class(ident[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
		is64 = true
	case elf.ELFCLASS32:
	default:
		return "", errors.New("unknown ELF class")
	}

	// The fields of elf.Header64 / elf.Header32 that are used, decoded
	// by hand: binary.Read's reflection was a fifth of readSoname.
	var (
		etype         uint16
		phoff         uint64
		phentsz, phnm uint16
	)
	if is64 {
		h, err := s.readFull(r, 0, header64Size)
		if err != nil {
			return "", fmt.Errorf("ELF header: %w", err)
		}
		etype, phoff, phentsz, phnm = bo.Uint16(h[16:]), bo.Uint64(h[32:]), bo.Uint16(h[54:]), bo.Uint16(h[56:])
	} else {
		h, err := s.readFull(r, 0, header32Size)
		if err != nil {
			return "", fmt.Errorf("ELF header: %w", err)
		}
		etype, phoff, phentsz, phnm = bo.Uint16(h[16:]), uint64(bo.Uint32(h[28:])), bo.Uint16(h[42:]), bo.Uint16(h[44:])
	}
	if elf.Type(etype) != elf.ET_DYN {
		return "", fmt.Errorf("ELF type %v is not a shared object", elf.Type(etype))
	}

	want := 32
	if is64 {
		want = 56
	}
	if int(phentsz) < want || int(phentsz)*int(phnm) > maxPhdrBytes || phoff > 1<<40 {
		return "", errors.New("bad program header table")
	}
	phdrs, err := s.readAt(r, int64(phoff), int(phentsz)*int(phnm))
	if err != nil {
		return "", fmt.Errorf("program headers: %w", err)
	}
	loads := s.loads[:0]
	var dyn segment
	haveDyn := false
	for i := 0; i < int(phnm); i++ {
		p := phdrs[i*int(phentsz):]
		var sg segment
		if is64 {
			sg = segment{uint64(bo.Uint32(p[0:])), bo.Uint64(p[8:]), bo.Uint64(p[16:]), bo.Uint64(p[32:])}
		} else {
			sg = segment{uint64(bo.Uint32(p[0:])), uint64(bo.Uint32(p[4:])), uint64(bo.Uint32(p[8:])), uint64(bo.Uint32(p[16:]))}
		}
		switch elf.ProgType(sg.typ) {
		case elf.PT_LOAD:
			loads = append(loads, sg)
		case elf.PT_DYNAMIC:
			if !haveDyn {
				dyn, haveDyn = sg, true
			}
		}
	}
	s.loads = loads
	if !haveDyn {
		return "", errNoSoname
	}
	if dyn.filesz > maxDynBytes {
		return "", errors.New("dynamic segment too large")
	}
	dynData, err := s.readAt(r, int64(dyn.off), int(dyn.filesz))
	if err != nil {
		return "", fmt.Errorf("dynamic segment: %w", err)
	}
	entSize := 8
	if is64 {
		entSize = 16
	}
	var (
		strtab, strsz, soname uint64
		haveStrtab, haveName  bool
	)
	for i := 0; i+entSize <= len(dynData); i += entSize {
		var tag, val uint64
		if is64 {
			tag, val = bo.Uint64(dynData[i:]), bo.Uint64(dynData[i+8:])
		} else {
			tag, val = uint64(bo.Uint32(dynData[i:])), uint64(bo.Uint32(dynData[i+4:]))
		}
		switch elf.DynTag(tag) {
		case elf.DT_NULL:
			i = len(dynData)
		case elf.DT_STRTAB:
			strtab, haveStrtab = val, true
		case elf.DT_STRSZ:
			strsz = val
		case elf.DT_SONAME:
			soname, haveName = val, true
		}
	}
	if !haveName {
		return "", errNoSoname
	}
	if !haveStrtab || soname >= strsz {
		return "", errors.New("bad dynamic string table")
	}
	// DT_STRTAB is an address: find the file offset of the segment holding it.
	var strOff uint64
	found := false
	for _, l := range loads {
		if strtab >= l.vaddr && strtab-l.vaddr < l.filesz {
			strOff, found = strtab-l.vaddr+l.off, true
			break
		}
	}
	if !found {
		return "", errors.New("dynamic string table outside the loaded segments")
	}
	n := min(strsz-soname, maxSonameBytes)
	buf, err := s.readAt(r, int64(strOff+soname), int(n))
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("SONAME: %w", err)
	}
	end := bytes.IndexByte(buf, 0)
	if end < 0 {
		return "", errors.New("unterminated SONAME")
	}
	return string(buf[:end]), nil
}
