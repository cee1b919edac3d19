// Package ldcache reads and writes glibc's dynamic loader cache
// (/etc/ld.so.cache) in pure Go, and scans library directories the way
// ldconfig does.
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
//   - Scan reads only the named directories (not the subdirectories), opens
//     every path through a rootfs.Root so that symlinks in a container image
//     cannot lead outside the root, and never runs a program.
//   - SonameReader, which Scan and discovery's XRE scan share, reads a
//     file's DT_SONAME as ldconfig does (ELF header, program headers,
//     PT_DYNAMIC, one string; the last of repeated tags counts), in a few
//     bounded preads into reused buffers; hostile files yield an error,
//     never a panic or an allocation beyond those bounds. It also gives
//     the cache flags ldconfig records for the file's class and machine
//     (x86-64 0x0303, aarch64 0x0a03, ...) and the machine itself; Arches
//     lists the machines xpu-cdi supports with the flags their loader
//     accepts. Scan keeps every machine's libraries, as ldconfig does (the
//     loader skips the others' entries); discovery filters by machine.
//
// Not supported: writing glibc-hwcaps subdirectory entries (entries whose
// HWCap carries the extension bit): Encode refuses them, callers drop them
// (the loader then falls back to the plain entries). The string comparison
// emulates the signedness of C's char on the architecture the binary is
// built for, which is what matters for the loader on the same machine.
package ldcache
