package fakehost

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
)

// sonamePlaceholder is the SONAME the library template is linked with. It is
// overwritten in .dynstr (NUL padded) to give each copy its real SONAME.
var sonamePlaceholder = "XPU_FAKEHOST_SONAME_PLACEHOLDER_" + string(bytes.Repeat([]byte("X"), 96))

// versionPlaceholder is the initial content of xpurt_version_string in
// libxpurt.so.1 (63 characters, array of 64).
const versionPlaceholder = "@@XPURT_VERSION_PLACEHOLDER_PADDED_TO_SIXTY_THREE_BYTES_XXXXXX@"

// errPlaceholder reports a placeholder missing from, or repeated in, a section.
var errPlaceholder = errors.New("placeholder not found exactly once")

// patchSite is where a placeholder string lives in an ELF image.
type patchSite struct {
	offset int // file offset of the first byte
	size   int // bytes available, excluding the terminating NUL
}

// findPlaceholder locates the NUL-terminated placeholder inside the named
// section of an ELF image.
func findPlaceholder(image []byte, section, placeholder string) (patchSite, error) {
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		return patchSite{}, fmt.Errorf("parsing ELF template: %w", err)
	}
	defer f.Close()
	s := f.Section(section)
	if s == nil || s.Type == elf.SHT_NOBITS {
		return patchSite{}, fmt.Errorf("ELF template has no %s section: %w", section, errPlaceholder)
	}
	start, end := int(s.Offset), int(s.Offset+s.Size)
	if start < 0 || end > len(image) || start > end {
		return patchSite{}, fmt.Errorf("ELF template section %s out of bounds", section)
	}
	needle := append([]byte(placeholder), 0)
	data := image[start:end]
	i := bytes.Index(data, needle)
	if i < 0 || bytes.Contains(data[i+1:], needle) {
		return patchSite{}, fmt.Errorf("%q in %s: %w", placeholder, section, errPlaceholder)
	}
	return patchSite{offset: start + i, size: len(placeholder)}, nil
}

// patch writes s over the placeholder at site in image, NUL padding the rest.
func (p patchSite) patch(image []byte, s string) error {
	if len(s) == 0 || len(s) > p.size {
		return fmt.Errorf("string %q does not fit a %d-byte placeholder", s, p.size)
	}
	if bytes.IndexByte([]byte(s), 0) >= 0 {
		return fmt.Errorf("string %q contains a NUL byte", s)
	}
	n := copy(image[p.offset:p.offset+p.size], s)
	clear(image[p.offset+n : p.offset+p.size+1])
	return nil
}
