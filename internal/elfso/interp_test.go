package elfso

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testenv"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// debugELFInterp is what debug/elf reads as the interpreter of path.
func debugELFInterp(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			_, err := p.ReadAt(b, 0)
			require.NoError(t, err)
			return string(bytes.TrimRight(b, "\x00"))
		}
	}
	return ""
}

func interpOf(t *testing.T, b []byte) (string, error) {
	t.Helper()
	return Interpreter(bytes.NewReader(b), int64(len(b)))
}

func TestInterpreter(t *testing.T) {
	sh := testreq.Tool(t, "sh")
	real, err := filepath.EvalSymlinks(sh)
	require.NoError(t, err)
	image, err := os.ReadFile(real)
	require.NoError(t, err)
	want := debugELFInterp(t, real)
	require.NotEmpty(t, want, "%s is dynamic", real)
	got, err := interpOf(t, image)
	require.NoError(t, err)
	require.Equal(t, want, got, "as debug/elf reads it")

	patched := filepath.Join(t.TempDir(), "patched")
	require.NoError(t, testenv.CopyWithInterpreter(real, patched, "/lib/ld-missing.so"))
	b, err := os.ReadFile(patched)
	require.NoError(t, err)
	got, err = interpOf(t, b)
	require.NoError(t, err)
	require.Equal(t, "/lib/ld-missing.so", got)

	got, err = interpOf(t, []byte("#!/opt/none/bin/python3 -u\nprint(1)\n"))
	require.NoError(t, err)
	require.Equal(t, "/opt/none/bin/python3", got)

	_, err = interpOf(t, []byte("MZ not a program"))
	require.ErrorIs(t, err, ErrNotExecutable)

	// A program header table past the file's end, and one too big, are
	// refused before anything is read.
	bo := binary.ByteOrder(binary.LittleEndian)
	if elf.Data(image[elf.EI_DATA]) == elf.ELFDATA2MSB {
		bo = binary.BigEndian
	}
	require.Equal(t, elf.ELFCLASS64, elf.Class(image[elf.EI_CLASS]))
	past := bytes.Clone(image)
	bo.PutUint64(past[32:], uint64(len(image))) // e_phoff
	_, err = interpOf(t, past)
	require.ErrorContains(t, err, "a program header table of")
	many := bytes.Clone(image)
	bo.PutUint16(many[56:], 0xffff) // e_phnum
	_, err = interpOf(t, many)
	require.ErrorContains(t, err, "a program header table of 65535 entries")
}

// FuzzInterpreter: any input gives an answer or an error, never a panic.
func FuzzInterpreter(f *testing.F) {
	f.Add([]byte("#!/bin/sh\n"))
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	if b, err := os.ReadFile("/bin/true"); err == nil && len(b) < 1<<20 {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Interpreter(bytes.NewReader(b), int64(len(b)))
	})
}
