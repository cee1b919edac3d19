// Package ldcache reads and writes glibc's dynamic loader cache
// (/etc/ld.so.cache) in pure Go: the cache format, its flags and the order
// the loader's binary search needs.
//
// Guarantees:
//   - Parse accepts the old format ("ld.so-1.7.0") with the new format
//     appended, and the new-only format ("glibc-ld.so.cache1.1", written by
//     glibc 2.32 and later). Every offset and count is bounds-checked; hostile
//     input yields an error naming what is wrong, never a panic or an
//     allocation larger than the input.
//   - Encode writes the new-only format (what glibc 2.32+ writes and every
//     glibc since 2.3 reads), with entries ordered as ldconfig orders them
//     (descending by _dl_cache_libcmp of the soname, then by flags, then by
//     hwcap), which the loader's binary search requires. Entries that compare
//     equal keep their input order: the first one wins at load time, so callers
//     put the entries they want preferred first.
//   - ReadFile reads a cache file without blocking on a FIFO, regular
//     files only, bounded (fdio).
//
// Reading SONAMEs and cache flags of library files is package elfso's;
// scanning a container's library folders, the hook's (internal/hook).
//
// Not supported: writing glibc-hwcaps subdirectory entries (entries whose
// HWCap carries the extension bit): Encode refuses them, callers drop them
// (the loader then falls back to the plain entries). The string comparison
// emulates the signedness of C's char on the architecture the binary is
// built for, which is what matters for the loader on the same machine.
package ldcache
