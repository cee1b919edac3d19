package ldcache

// Entry is one library in the cache.
type Entry struct {
	// Name is the key the loader looks up: the SONAME, e.g. libxpurt.so.1.
	Name string
	// Path is the absolute path the loader opens, as seen inside the root.
	Path string
	// Flags is the library type (FlagELF...) or-ed with the required
	// architecture bits (FlagX8664Lib64...).
	Flags int32
	// HWCap is the hardware capability mask; 0 for ordinary entries.
	HWCap uint64
}

// Flags as glibc's sysdeps/generic/ldconfig.h defines them.
const (
	FlagAny      int32 = -1
	FlagTypeMask int32 = 0x00ff
	FlagLibc4    int32 = 0x0000
	FlagELF      int32 = 0x0001
	FlagELFLibc5 int32 = 0x0002
	FlagELFLibc6 int32 = 0x0003

	FlagRequiredMask        int32 = 0xff00
	FlagSparcLib64          int32 = 0x0100
	FlagIA64Lib64           int32 = 0x0200
	FlagX8664Lib64          int32 = 0x0300
	FlagS390Lib64           int32 = 0x0400
	FlagPowerPCLib64        int32 = 0x0500
	FlagMIPS64LibN32        int32 = 0x0600
	FlagMIPS64LibN64        int32 = 0x0700
	FlagX8664LibX32         int32 = 0x0800
	FlagARMLibHF            int32 = 0x0900
	FlagAArch64Lib64        int32 = 0x0a00
	FlagARMLibSF            int32 = 0x0b00
	FlagMIPSLib32NaN2008    int32 = 0x0c00
	FlagMIPS64LibN32NaN2008 int32 = 0x0d00
	FlagMIPS64LibN64NaN2008 int32 = 0x0e00
	FlagRISCVFloatABISoft   int32 = 0x0f00
	FlagRISCVFloatABIDouble int32 = 0x1000
	FlagLArchFloatABISoft   int32 = 0x1100
	FlagLArchFloatABIDouble int32 = 0x1200
)

// HWCapExtension is the bit (DL_CACHE_HWCAP_EXTENSION) that marks an entry
// whose low 32 HWCap bits index the glibc-hwcaps subdirectory table.
const HWCapExtension uint64 = 1 << 62

const (
	magicOld        = "ld.so-1.7.0"
	magicNew        = "glibc-ld.so.cache1.1"
	oldHeaderSize   = 16 // magic[11], pad, nlibs
	oldEntrySize    = 12 // flags, key, value
	newHeaderSize   = 48
	newEntrySize    = 24 // flags, key, value, osversion, hwcap
	cacheAlign      = 8  // __alignof__ (struct cache_file_new)
	endianMask      = 3
	endianUnset     = 0
	endianInvalid   = 1
	endianLittle    = 2
	endianBig       = 3
	hwcapExtMask    = 0xffffffff00000000
	maxStringLength = 4096
)
