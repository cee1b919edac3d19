package elfso

import (
	"debug/elf"
	"fmt"
	"runtime"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
)

// Arch is a machine xpu-cdi handles libraries of: its Go name, the ELF
// machine of its shared objects, and the flags ldconfig records for them
// in the cache. They are the only flags that machine's loader accepts:
// glibc's _dl_cache_check_flags for x86-64 and aarch64
// (sysdeps/unix/sysv/linux/<arch>/dl-cache.h) is flags ==
// _DL_CACHE_DEFAULT_ID, FLAG_X8664_LIB64|FLAG_ELF_LIBC6 (0x0303) and
// FLAG_AARCH64_LIB64|FLAG_ELF_LIBC6 (0x0a03) for LP64; an entry with
// other flags is skipped at load time without a word.
type Arch struct {
	GOARCH  string
	Machine elf.Machine
	Flags   int32
}

// Arches are the machines xpu-cdi is built and tested for: x86-64 and
// aarch64 (LP64), both 64-bit little-endian.
var Arches = []Arch{
	{GOARCH: "amd64", Machine: elf.EM_X86_64, Flags: ldcache.FlagELFLibc6 | ldcache.FlagX8664Lib64},
	{GOARCH: "arm64", Machine: elf.EM_AARCH64, Flags: ldcache.FlagELFLibc6 | ldcache.FlagAArch64Lib64},
}

// ArchByGOARCH returns the Arch of a Go architecture name (amd64, arm64).
func ArchByGOARCH(goarch string) (Arch, error) {
	for _, a := range Arches {
		if a.GOARCH == goarch {
			return a, nil
		}
	}
	names := make([]string, len(Arches))
	for i, a := range Arches {
		names[i] = a.GOARCH
	}
	return Arch{}, fmt.Errorf("architecture %q is not supported (supported: %v)", goarch, names)
}

// NativeArch returns the Arch of the machine this binary is built for, and
// false where that is none of Arches.
func NativeArch() (Arch, bool) {
	a, err := ArchByGOARCH(runtime.GOARCH)
	return a, err == nil
}

// MachineName names an ELF machine for messages: "x86-64", "aarch64", the
// debug/elf name of another known machine, or its number.
func MachineName(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "x86-64"
	case elf.EM_AARCH64:
		return "aarch64"
	}
	// debug/elf names a value it does not know after the nearest known
	// one ("EM_ALPHA+11977") or by its number.
	if s := m.String(); !strings.ContainsRune(s, '+') && s != fmt.Sprint(uint32(m)) {
		return s
	}
	return fmt.Sprintf("unknown machine %#x", uint16(m))
}
