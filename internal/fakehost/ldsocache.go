package fakehost

import (
	"fmt"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
)

// ldCacheEntries lists what ldconfig would cache: one entry per SONAME and
// one per development link, for the libraries of the XRE directory named
// in ld.so.conf.d (4.x layout: lib64, with paths through /usr/local/xpu as
// the conf file names it) and of system directories (absolute Dir). XRE
// 5's so/ is not registered. The flags are those ldconfig gives the
// host machine's glibc shared objects (x86-64 0x0303, aarch64 0x0a03).
func ldCacheEntries(h *Host) []ldcache.Entry {
	arch, err := h.ldArch()
	if err != nil {
		return nil // validate refused the host already
	}
	ldFlags := arch.Flags
	var entries []ldcache.Entry
	for _, l := range h.Libraries {
		var dir string
		switch {
		case strings.HasPrefix(l.Dir, "/"):
			dir = l.Dir
		case (l.Dir == "" || l.Dir == "lib64") && !h.XRE5():
			dir = XRELibDir
		default:
			continue
		}
		entries = append(entries, ldcache.Entry{Name: l.SONAME, Path: dir + "/" + l.SONAME, Flags: ldFlags})
		for _, dl := range l.DevLinks {
			entries = append(entries, ldcache.Entry{Name: dl, Path: dir + "/" + dl, Flags: ldFlags})
		}
	}
	return entries
}

// buildLdCache writes /etc/ld.so.cache for the tree.
func (b *builder) buildLdCache() error {
	data, err := ldcache.Encode(ldCacheEntries(&b.h))
	if err != nil {
		return fmt.Errorf("encoding %s: %w", b.full(LdCachePath), err)
	}
	if err := b.writeFile(LdCachePath, data, 0o644); err != nil {
		return err
	}
	b.t.LdCache = LdCachePath
	return nil
}
