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
	defer func() { _ = f.Close() }() // read-only
	soname, err := sonameOf(newPrefixReader(f))
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

func newPrefixReader(r io.ReaderAt) *prefixReader {
	buf := make([]byte, prefixSize)
	n, err := r.ReadAt(buf, 0)
	return &prefixReader{r: r, prefix: buf[:n], eof: err != nil}
}

func (p *prefixReader) ReadAt(b []byte, off int64) (int, error) {
	if off >= 0 && off < int64(len(p.prefix)) && (off+int64(len(b)) <= int64(len(p.prefix)) || p.eof) {
		n := copy(b, p.prefix[off:])
		if n < len(b) {
			return n, io.EOF
		}
		return n, nil
	}
	return p.r.ReadAt(b, off)
}

func sonameOf(r io.ReaderAt) (string, error) {
	var ident [elf.EI_NIDENT]byte
	if _, err := r.ReadAt(ident[:], 0); err != nil {
		return "", fmt.Errorf("not an ELF file: %w", err)
	}
	if !bytes.Equal(ident[:4], []byte(elf.ELFMAG)) {
		return "", errors.New("not an ELF file")
	}
	var bo binary.ByteOrder
	switch elf.Data(ident[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		bo = binary.LittleEndian
	case elf.ELFDATA2MSB:
		bo = binary.BigEndian
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

	var (
		etype         uint16
		phoff         uint64
		phentsz, phnm uint16
	)
	if is64 {
		var h elf.Header64
		if err := binary.Read(io.NewSectionReader(r, 0, int64(binary.Size(h))), bo, &h); err != nil {
			return "", fmt.Errorf("ELF header: %w", err)
		}
		etype, phoff, phentsz, phnm = h.Type, h.Phoff, h.Phentsize, h.Phnum
	} else {
		var h elf.Header32
		if err := binary.Read(io.NewSectionReader(r, 0, int64(binary.Size(h))), bo, &h); err != nil {
			return "", fmt.Errorf("ELF header: %w", err)
		}
		etype, phoff, phentsz, phnm = h.Type, uint64(h.Phoff), h.Phentsize, h.Phnum
	}
	if elf.Type(etype) != elf.ET_DYN {
		return "", fmt.Errorf("ELF type %v is not a shared object", elf.Type(etype))
	}

	type segment struct{ typ, off, vaddr, filesz uint64 }
	want := 32
	if is64 {
		want = 56
	}
	if int(phentsz) < want || int(phentsz)*int(phnm) > maxPhdrBytes || phoff > 1<<40 {
		return "", errors.New("bad program header table")
	}
	phdrs := make([]byte, int(phentsz)*int(phnm))
	if _, err := r.ReadAt(phdrs, int64(phoff)); err != nil {
		return "", fmt.Errorf("program headers: %w", err)
	}
	var loads []segment
	var dyn *segment
	for i := 0; i < int(phnm); i++ {
		p := phdrs[i*int(phentsz):]
		var s segment
		if is64 {
			s = segment{uint64(bo.Uint32(p[0:])), bo.Uint64(p[8:]), bo.Uint64(p[16:]), bo.Uint64(p[32:])}
		} else {
			s = segment{uint64(bo.Uint32(p[0:])), uint64(bo.Uint32(p[4:])), uint64(bo.Uint32(p[8:])), uint64(bo.Uint32(p[16:]))}
		}
		switch elf.ProgType(s.typ) {
		case elf.PT_LOAD:
			loads = append(loads, s)
		case elf.PT_DYNAMIC:
			if dyn == nil {
				dyn = &s
			}
		}
	}
	if dyn == nil {
		return "", errNoSoname
	}
	if dyn.filesz > maxDynBytes {
		return "", errors.New("dynamic segment too large")
	}
	dynData := make([]byte, dyn.filesz)
	if _, err := r.ReadAt(dynData, int64(dyn.off)); err != nil {
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
	buf := make([]byte, n)
	read, err := r.ReadAt(buf, int64(strOff+soname))
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("SONAME: %w", err)
	}
	buf = buf[:read]
	end := bytes.IndexByte(buf, 0)
	if end < 0 {
		return "", errors.New("unterminated SONAME")
	}
	return string(buf[:end]), nil
}
