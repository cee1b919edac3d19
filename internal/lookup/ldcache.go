package lookup

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"github.com/xpu-cdi/xpu-cdi/internal/elfso"
	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
)

// CachePath is the loader cache below a root.
const CachePath = "/etc/ld.so.cache"

// Bounds on the driver root's cache: a real host's has a few thousand
// entries in a few hundred KB.
const (
	// MaxCacheSize is the largest ld.so.cache read.
	MaxCacheSize = 16 << 20
	// MaxCacheEntries is the most entries it may declare.
	MaxCacheEntries = 1 << 18
)

// LdcacheLocator reads the ld.so.cache of a root: the libraries it knows,
// by SONAME. The cache is read once, on first use.
type LdcacheLocator struct {
	root string
	// accept says which entries count: by default those of this
	// machine's ABI.
	accept func(flags int32) bool
	once   sync.Once
	byName map[string][]string
	err    error
}

// NewLdcacheLocator returns a LdcacheLocator reading root's /etc/ld.so.cache,
// taking the entries of this machine's ABI.
func NewLdcacheLocator(root string) *LdcacheLocator {
	return &LdcacheLocator{root: root, accept: nativeFlags}
}

// NewLdcacheLocatorFor is NewLdcacheLocator for a root of the machine arch
// (a driver root of another machine than this one): it takes the entries
// that machine's loader would use.
func NewLdcacheLocatorFor(root string, arch elfso.Arch) *LdcacheLocator {
	return &LdcacheLocator{root: root, accept: func(f int32) bool { return f == arch.Flags }}
}

func (l *LdcacheLocator) load() {
	p := filepath.Join(l.root, CachePath)
	data, err := ldcache.ReadFile(p, MaxCacheSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			l.err = fmt.Errorf("%s: %w", p, ErrNotFound)
			return
		}
		l.err = fmt.Errorf("reading %s: %w", p, err)
		return
	}
	entries, err := ldcache.ParseMax(data, MaxCacheEntries)
	if err != nil {
		l.err = fmt.Errorf("parsing %s: %w", p, err)
		return
	}
	l.byName = make(map[string][]string)
	for _, e := range entries {
		if !l.accept(e.Flags) {
			continue
		}
		l.byName[e.Name] = append(l.byName[e.Name], e.Path)
	}
}

// Entries returns the native entries of the cache by SONAME.
func (l *LdcacheLocator) Entries() (map[string][]string, error) {
	l.once.Do(l.load)
	return l.byName, l.err
}
