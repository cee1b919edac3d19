package testenv

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
)

// CopyWithInterpreter copies the dynamic ELF executable src to dst (mode
// 0755) with its PT_INTERP changed to interp, which must fit in the
// original's: a real program whose loader is elsewhere (or nowhere), as a
// host's tool is in a root that lacks the host's glibc.
func CopyWithInterpreter(src, dst, interp string) error {
	image, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	f, err := elf.Open(src)
	if err != nil {
		return fmt.Errorf("reading %s as ELF: %w", src, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		if uint64(len(interp)) >= p.Filesz {
			return fmt.Errorf("%s: interpreter %q does not fit in its %d bytes", src, interp, p.Filesz)
		}
		seg := image[p.Off : p.Off+p.Filesz]
		clear(seg)
		copy(seg, interp)
		if err := os.WriteFile(dst, image, 0o755); err != nil {
			return fmt.Errorf("writing %s: %w", dst, err)
		}
		return nil
	}
	return errors.New(src + " has no PT_INTERP: it is not a dynamic executable")
}
