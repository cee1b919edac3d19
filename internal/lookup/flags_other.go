//go:build !amd64 && !arm64

package lookup

import "github.com/xpu-cdi/xpu-cdi/internal/ldcache"

// nativeFlags accepts any libc6 ELF entry where the ABI flag is not known.
func nativeFlags(f int32) bool {
	return f&ldcache.FlagTypeMask == ldcache.FlagELFLibc6
}
