package lookup

import "github.com/xpu-cdi/xpu-cdi/internal/ldcache"

// nativeFlags reports whether a cache entry is for this machine's ABI.
func nativeFlags(f int32) bool {
	return f == ldcache.FlagELFLibc6|ldcache.FlagX8664Lib64
}
