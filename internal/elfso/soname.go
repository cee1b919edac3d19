package elfso

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
)

// Bounds for what SonameReader reads of a file: a real shared object has a
// dozen program headers and a few dozen dynamic entries.
const (
	maxPhdrBytes = 16 << 10
	maxDynBytes  = 64 << 10
	prefixSize   = 2 << 10
	// maxSonameLength is the longest SONAME read (the bound ldcache puts
	// on a cache string).
	maxSonameLength = 4096
)

// errNoSoname is returned for an ELF file without a DT_SONAME, or with an
// empty one.
var errNoSoname = errors.New("no DT_SONAME")

// SonameReader reads the SONAME and cache flags of ELF shared objects the
// way ldconfig does (readelflib.c): the ELF header, the program headers,
// the PT_DYNAMIC segment and the one string, in three or four preads, the
// first of which (the file's first bytes) usually holds the headers.
// debug/elf parsed every section header and the section name table, with
// nine preads and a few dozen allocations per file. One reader serves all
// the files of a scan (an ldconfig-style scan of a container's library
// directories, discovery's scan of the XRE) with the same buffers: a
// SONAME read costs one allocation, the returned string. The zero value
// is ready to use; a SonameReader is not safe for concurrent use.
//
// The input is untrusted: every size and offset is bounded before it is
// read, hostile files yield an error, never a panic or a large allocation.
type SonameReader struct {
	prefix  [prefixSize]byte
	have    []byte // the part of prefix read from the current file
	eof     bool   // the file ends within prefix
	scratch []byte
	loads   []segment
}

type segment struct{ off, vaddr, filesz uint64 }

// readAt returns the n bytes at off (fewer, with io.EOF, at the end of the
// file): a view of the prefix when it holds them, else read into the
// scratch buffer. The bytes are valid until the next call.
func (s *SonameReader) readAt(r io.ReaderAt, off uint64, n int) ([]byte, error) {
	if off < uint64(len(s.have)) && (off+uint64(n) <= uint64(len(s.have)) || s.eof) {
		b := s.have[off:min(off+uint64(n), uint64(len(s.have)))]
		if len(b) < n {
			return b, io.EOF
		}
		return b, nil
	}
	if off > 1<<62 {
		return nil, io.EOF
	}
	if cap(s.scratch) < n {
		s.scratch = make([]byte, n)
	}
	b := s.scratch[:n]
	m, err := r.ReadAt(b, int64(off))
	return b[:m], err
}

// readFull is readAt that turns a short read into io.ErrUnexpectedEOF.
func (s *SonameReader) readFull(r io.ReaderAt, off uint64, n int) ([]byte, error) {
	b, err := s.readAt(r, off, n)
	switch {
	case len(b) == n:
		return b, nil
	case err == nil || errors.Is(err, io.EOF):
		return nil, io.ErrUnexpectedEOF
	}
	return nil, err
}

// endian reads the fields of an ELF file in its byte order; a concrete type
// so that the calls inline.
type endian struct{ big bool }

func (e endian) u16(b []byte) uint16 {
	if e.big {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func (e endian) u32(b []byte) uint32 {
	if e.big {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

func (e endian) u64(b []byte) uint64 {
	if e.big {
		return binary.BigEndian.Uint64(b)
	}
	return binary.LittleEndian.Uint64(b)
}

// Info is what SonameReader reads of a shared object.
type Info struct {
	Soname string
	// Flags are the cache flags ldconfig records for it (its class,
	// machine and ABI).
	Flags int32
	// Machine is the ELF header's e_machine, whatever its value.
	Machine elf.Machine
}

// Read returns the SONAME of the ELF shared object r and the flags ldconfig
// records for it in the cache (its class, machine and ABI). r must be
// ET_DYN with a PT_DYNAMIC segment whose non-empty DT_SONAME lies in a
// PT_LOAD segment; where DT_SONAME, DT_STRTAB or DT_STRSZ repeat, the last
// one counts, as for ldconfig and the loader (debug/elf returns the first).
func (s *SonameReader) Read(r io.ReaderAt) (string, int32, error) {
	i, err := s.ReadInfo(r)
	return i.Soname, i.Flags, err
}

// ReadInfo is Read that also returns the file's ELF machine, which callers
// that must not take another machine's library check.
func (s *SonameReader) ReadInfo(r io.ReaderAt) (Info, error) {
	soname, flags, machine, err := s.read(r)
	if err != nil {
		return Info{}, err
	}
	return Info{Soname: soname, Flags: flags, Machine: machine}, nil
}

func (s *SonameReader) read(r io.ReaderAt) (string, int32, elf.Machine, error) {
	n, err := r.ReadAt(s.prefix[:], 0)
	s.have, s.eof = s.prefix[:n], err != nil
	if n < elf.EI_NIDENT {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return "", 0, 0, fmt.Errorf("reading the ELF header: %w", err)
	}
	ident := s.have[:elf.EI_NIDENT]
	if !bytes.Equal(ident[:4], []byte(elf.ELFMAG)) {
		return "", 0, 0, fmt.Errorf("bad magic number %q", ident[:4])
	}
	var bo endian
	switch elf.Data(ident[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
	case elf.ELFDATA2MSB:
		bo.big = true
	default:
		return "", 0, 0, fmt.Errorf("unknown ELF data encoding %v", elf.Data(ident[elf.EI_DATA]))
	}
	class := elf.Class(ident[elf.EI_CLASS])
	var (
		etype, machine, phentsize, phnum uint16
		phoff                            uint64
		eflags                           uint32
		minPhent                         uint16
	)
	switch class {
	case elf.ELFCLASS64:
		h, err := s.readFull(r, 0, 64)
		if err != nil {
			return "", 0, 0, fmt.Errorf("reading the ELF header: %w", err)
		}
		etype, machine, phoff, eflags = bo.u16(h[16:]), bo.u16(h[18:]), bo.u64(h[32:]), bo.u32(h[48:])
		phentsize, phnum, minPhent = bo.u16(h[54:]), bo.u16(h[56:]), 56
	case elf.ELFCLASS32:
		h, err := s.readFull(r, 0, 52)
		if err != nil {
			return "", 0, 0, fmt.Errorf("reading the ELF header: %w", err)
		}
		etype, machine, phoff, eflags = bo.u16(h[16:]), bo.u16(h[18:]), uint64(bo.u32(h[28:])), bo.u32(h[36:])
		phentsize, phnum, minPhent = bo.u16(h[42:]), bo.u16(h[44:]), 32
	default:
		return "", 0, 0, fmt.Errorf("unknown ELF class %v", class)
	}
	if elf.Type(etype) != elf.ET_DYN {
		return "", 0, 0, fmt.Errorf("ELF type %v, not a shared object", elf.Type(etype))
	}
	if phnum == 0 {
		return "", 0, 0, errors.New("no program headers")
	}
	if phentsize < minPhent || int(phentsize)*int(phnum) > maxPhdrBytes {
		return "", 0, 0, fmt.Errorf("bad program header table (%d entries of %d bytes)", phnum, phentsize)
	}
	phdrs, err := s.readFull(r, phoff, int(phentsize)*int(phnum))
	if err != nil {
		return "", 0, 0, fmt.Errorf("reading the program headers: %w", err)
	}
	loads := s.loads[:0]
	var dyn segment
	haveDyn := false
	for i := range int(phnum) {
		p := phdrs[i*int(phentsize):]
		var typ uint32
		var sg segment
		if class == elf.ELFCLASS64 {
			typ, sg = bo.u32(p), segment{bo.u64(p[8:]), bo.u64(p[16:]), bo.u64(p[32:])}
		} else {
			typ, sg = bo.u32(p), segment{uint64(bo.u32(p[4:])), uint64(bo.u32(p[8:])), uint64(bo.u32(p[16:]))}
		}
		switch elf.ProgType(typ) {
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
		return "", 0, 0, errNoSoname
	}
	if dyn.filesz > maxDynBytes {
		return "", 0, 0, fmt.Errorf("dynamic segment of %d bytes, more than %d", dyn.filesz, maxDynBytes)
	}
	dynData, err := s.readFull(r, dyn.off, int(dyn.filesz))
	if err != nil {
		return "", 0, 0, fmt.Errorf("reading the dynamic segment: %w", err)
	}
	strtab, strsz, soname, haveStrtab, haveName := dynEntries(dynData, class == elf.ELFCLASS64, bo)
	if !haveName {
		return "", 0, 0, errNoSoname
	}
	if !haveStrtab || soname >= strsz {
		return "", 0, 0, errors.New("DT_SONAME outside the dynamic string table")
	}
	// DT_STRTAB is an address: the file offset is that of the segment
	// holding it.
	var strOff uint64
	found := false
	for _, l := range loads {
		if strtab >= l.vaddr && strtab-l.vaddr < l.filesz {
			strOff, found = strtab-l.vaddr+l.off, true
			break
		}
	}
	if !found {
		return "", 0, 0, errors.New("dynamic string table outside the loaded segments")
	}
	buf, err := s.readAt(r, strOff+soname, int(min(strsz-soname, maxSonameLength)))
	if err != nil && !errors.Is(err, io.EOF) {
		return "", 0, 0, fmt.Errorf("reading DT_SONAME: %w", err)
	}
	end := bytes.IndexByte(buf, 0)
	if end <= 0 {
		return "", 0, 0, errNoSoname
	}
	return string(buf[:end]), cacheFlags(class, elf.Machine(machine), eflags), elf.Machine(machine), nil
}

// dynEntries returns DT_STRTAB, DT_STRSZ and DT_SONAME of the dynamic
// entries in d, up to DT_NULL; the loader and ldconfig take the last of
// repeated tags.
func dynEntries(d []byte, is64 bool, bo endian) (strtab, strsz, soname uint64, haveStrtab, haveName bool) {
	size := 8
	if is64 {
		size = 16
	}
	for i := 0; i+size <= len(d); i += size {
		var tag, val uint64
		if is64 {
			tag, val = bo.u64(d[i:]), bo.u64(d[i+8:])
		} else {
			tag, val = uint64(bo.u32(d[i:])), uint64(bo.u32(d[i+4:]))
		}
		switch elf.DynTag(tag) {
		case elf.DT_NULL:
			return strtab, strsz, soname, haveStrtab, haveName
		case elf.DT_STRTAB:
			strtab, haveStrtab = val, true
		case elf.DT_STRSZ:
			strsz = val
		case elf.DT_SONAME:
			soname, haveName = val, true
		}
	}
	return strtab, strsz, soname, haveStrtab, haveName
}

// cacheFlags returns the flags ldconfig records for an ELF object of this
// class and machine (sysdeps/unix/sysv/linux/*/readelflib.c, dl-cache.h).
func cacheFlags(class elf.Class, machine elf.Machine, eflags uint32) int32 {
	is64 := class == elf.ELFCLASS64
	f := ldcache.FlagELFLibc6
	switch machine {
	case elf.EM_X86_64:
		if is64 {
			return f | ldcache.FlagX8664Lib64
		}
		return f | ldcache.FlagX8664LibX32
	case elf.EM_AARCH64:
		if is64 {
			return f | ldcache.FlagAArch64Lib64
		}
	case elf.EM_ARM:
		const efARMABIFloatHard, efARMABIFloatSoft = 0x400, 0x200
		switch {
		case eflags&efARMABIFloatHard != 0:
			return f | ldcache.FlagARMLibHF
		case eflags&efARMABIFloatSoft != 0:
			return f | ldcache.FlagARMLibSF
		}
	case elf.EM_PPC64:
		if is64 {
			return f | ldcache.FlagPowerPCLib64
		}
	case elf.EM_S390:
		if is64 {
			return f | ldcache.FlagS390Lib64
		}
	case elf.EM_SPARCV9:
		if is64 {
			return f | ldcache.FlagSparcLib64
		}
	case elf.EM_IA_64:
		if is64 {
			return f | ldcache.FlagIA64Lib64
		}
	case elf.EM_RISCV:
		const efRISCVFloatABI, soft, double = 0x6, 0x0, 0x4
		switch eflags & efRISCVFloatABI {
		case soft:
			return f | ldcache.FlagRISCVFloatABISoft
		case double:
			return f | ldcache.FlagRISCVFloatABIDouble
		}
	case elf.EM_LOONGARCH:
		const efLArchABIMask, soft, double = 0x7, 0x1, 0x3
		switch eflags & efLArchABIMask {
		case soft:
			return f | ldcache.FlagLArchFloatABISoft
		case double:
			return f | ldcache.FlagLArchFloatABIDouble
		}
	}
	return f
}
