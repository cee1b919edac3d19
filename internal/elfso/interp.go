package elfso

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Bounds of what Interpreter reads: the kernel reads at most PATH_MAX of a
// PT_INTERP and 256 bytes of a "#!" line (BINPRM_BUF_SIZE).
const (
	maxInterp     = 4096
	maxShebang    = 256
	maxProgHeader = 1 << 16
)

// ErrNotExecutable is the error of a file that is neither ELF nor a "#!"
// script.
var ErrNotExecutable = errors.New("neither an ELF file nor a #! script")

// Interpreter returns the program the kernel loads to run the executable r
// of size bytes: the ELF interpreter of its PT_INTERP (the dynamic loader,
// /lib64/ld-linux-x86-64.so.2), the interpreter of a "#!" line, or "" for a
// static ELF executable. It reads the first 256 bytes, the program
// headers (at most 64 KiB of them) and the interpreter's path (at most
// 4 KiB), each checked against size first: a hostile file yields an error,
// never more reading.
func Interpreter(r io.ReaderAt, size int64) (string, error) {
	head := make([]byte, maxShebang)
	n, err := r.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the header: %w", err)
	}
	head = head[:n]
	if line, ok := bytes.CutPrefix(head, []byte("#!")); ok {
		line, _, _ = bytes.Cut(line, []byte("\n"))
		fields := bytes.Fields(line)
		if len(fields) == 0 {
			return "", fmt.Errorf("%w: an empty #! line", ErrNotExecutable)
		}
		return string(fields[0]), nil
	}
	if len(head) < elf.EI_NIDENT || !bytes.HasPrefix(head, []byte(elf.ELFMAG)) {
		return "", ErrNotExecutable
	}
	var bo binary.ByteOrder
	switch elf.Data(head[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		bo = binary.LittleEndian
	case elf.ELFDATA2MSB:
		bo = binary.BigEndian
	default:
		return "", fmt.Errorf("ELF data encoding %d", head[elf.EI_DATA])
	}
	// The program header table: where, how many, how big each.
	var phoff uint64
	var phnum, phentsize uint16
	switch elf.Class(head[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
		var h elf.Header64
		if err := binary.Read(bytes.NewReader(head), bo, &h); err != nil {
			return "", fmt.Errorf("reading the ELF header: %w", err)
		}
		phoff, phnum, phentsize = h.Phoff, h.Phnum, h.Phentsize
	case elf.ELFCLASS32:
		var h elf.Header32
		if err := binary.Read(bytes.NewReader(head), bo, &h); err != nil {
			return "", fmt.Errorf("reading the ELF header: %w", err)
		}
		phoff, phnum, phentsize = uint64(h.Phoff), h.Phnum, h.Phentsize
	default:
		return "", fmt.Errorf("ELF class %d", head[elf.EI_CLASS])
	}
	is64 := elf.Class(head[elf.EI_CLASS]) == elf.ELFCLASS64
	want := uint16(32)
	if is64 {
		want = 56
	}
	table := uint64(phnum) * uint64(phentsize)
	if phentsize < want || table > maxProgHeader || phoff > uint64(size) || table > uint64(size)-phoff {
		return "", fmt.Errorf("a program header table of %d entries of %d bytes at %d, in a file of %d bytes", phnum, phentsize, phoff, size)
	}
	ph := make([]byte, table)
	if n, err := r.ReadAt(ph, int64(phoff)); n < len(ph) {
		return "", fmt.Errorf("reading the program headers: %w", err)
	}
	for i := range int(phnum) {
		e := ph[i*int(phentsize):]
		var off, filesz uint64
		if elf.ProgType(bo.Uint32(e)) != elf.PT_INTERP {
			continue
		}
		if is64 {
			off, filesz = bo.Uint64(e[8:]), bo.Uint64(e[32:])
		} else {
			off, filesz = uint64(bo.Uint32(e[4:])), uint64(bo.Uint32(e[16:]))
		}
		if filesz == 0 || filesz > maxInterp || off > uint64(size) || filesz > uint64(size)-off {
			return "", fmt.Errorf("an interpreter path of %d bytes at %d, in a file of %d bytes", filesz, off, size)
		}
		b := make([]byte, filesz)
		if _, err := r.ReadAt(b, int64(off)); err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("reading the interpreter path: %w", err)
		}
		path, _, _ := bytes.Cut(b, []byte{0})
		return string(path), nil
	}
	return "", nil
}
