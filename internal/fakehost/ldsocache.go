package fakehost

import (
	"fmt"

	"github.com/xpu-cdi/xpu-cdi/pkg/ldcache"
)

// ldFlags are the cache flags ldconfig gives x86-64 glibc shared objects.
const ldFlags = ldcache.FlagELFLibc6 | ldcache.FlagX8664Lib64

// ldCacheEntries lists what ldconfig would cache for the XRE directory named
// in ld.so.conf.d: one entry per SONAME and one per development link, with
// paths through /usr/local/xpu as the conf file names it.
func ldCacheEntries(libs []Library) []ldcache.Entry {
	var entries []ldcache.Entry
	for _, l := range libs {
		entries = append(entries, ldcache.Entry{Name: l.SONAME, Path: XRELibDir + "/" + l.SONAME, Flags: ldFlags})
		for _, dl := range l.DevLinks {
			entries = append(entries, ldcache.Entry{Name: dl, Path: XRELibDir + "/" + dl, Flags: ldFlags})
		}
	}
	return entries
}

// buildLdCache writes /etc/ld.so.cache for the tree.
func (b *builder) buildLdCache() error {
	data, err := ldcache.Encode(ldCacheEntries(b.h.Libraries))
	if err != nil {
		return fmt.Errorf("encoding %s: %w", b.full(LdCachePath), err)
	}
	if err := b.writeFile(LdCachePath, data, 0o644); err != nil {
		return err
	}
	b.t.LdCache = LdCachePath
	return nil
}
