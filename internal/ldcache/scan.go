package ldcache

import (
	"debug/elf"
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

type options struct {
	log logger.Interface
}

// Option configures Scan.
type Option func(*options)

// WithLogger sets the logger Scan reports skipped directories and files to.
func WithLogger(l logger.Interface) Option { return func(o *options) { o.log = l } }

// Scan finds the ELF shared objects that have a DT_SONAME in each of dirs
// (paths inside root; not recursive) and returns cache entries for them the
// way ldconfig builds them: the key is the SONAME, the path is dir/SONAME
// when the directory has an entry of that name (usually the SONAME link),
// else the file itself; when several files of a directory share a SONAME
// and none is named by it, the one with the highest version (Libcmp) wins.
// Entries come in the order of dirs, then by name. A missing directory is
// skipped (and logged); other errors are returned.
func Scan(root *rootfs.Root, dirs []string, opts ...Option) ([]Entry, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	o.log = logger.OrDiscard(o.log)
	var entries []Entry
	seen := make(map[string]bool, len(dirs))
	for _, unsafeDir := range dirs {
		dir := path.Clean("/" + unsafeDir)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		found, err := scanDir(root, dir, o.log)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				o.log.Warnf("library directory %s does not exist in %s: %v", dir, root.Path(), err)
				continue
			}
			return nil, err
		}
		entries = append(entries, found...)
	}
	return entries, nil
}

// ScanFiles returns cache entries for the given library files (paths inside
// root), each read alone: key its SONAME, path the file as given. A file
// that is missing or not a shared library with a usable SONAME is skipped
// with a warning. Files that give the same entry count once.
func ScanFiles(root *rootfs.Root, files []string, opts ...Option) []Entry {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	o.log = logger.OrDiscard(o.log)
	var (
		sr      SonameReader
		entries []Entry
	)
	for _, unsafePath := range files {
		p := path.Clean("/" + unsafePath)
		soname, flags, err := readLib(&sr, root, p)
		switch {
		case err != nil:
			o.log.Warnf("library %s in %s left out of the cache: %v", p, root.Path(), err)
			continue
		case strings.ContainsRune(soname, '/'):
			o.log.Warnf("library %s in %s left out of the cache: its SONAME %q contains a slash", p, root.Path(), soname)
			continue
		}
		e := Entry{Name: soname, Path: p, Flags: flags}
		if !slices.Contains(entries, e) {
			entries = append(entries, e)
		}
	}
	return entries
}

// Bounds on a scanned directory, which the image can fill: names listed,
// and files opened to read a SONAME. A library folder of a real XRE has a
// few hundred files.
const (
	// MaxDirEntries is the most names read from one directory.
	MaxDirEntries = 65536
	// MaxLibrariesPerDir is the most candidate files read in one directory.
	MaxLibrariesPerDir = 4096
)

// candidate reports whether ldconfig would look at a file of this name.
func candidate(name string) bool {
	return (strings.HasPrefix(name, "lib") || strings.HasPrefix(name, "ld-")) && strings.Contains(name, ".so")
}

func scanDir(root *rootfs.Root, dir string, log logger.Interface) ([]Entry, error) {
	f, err := root.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	d := NewLibDir(f, path.Join(root.Path(), dir))
	defer func() { _ = d.Close() }() // read-only
	list, truncated, err := d.Entries(MaxDirEntries)
	if err != nil {
		return nil, err
	}
	if truncated {
		log.Warnf("library directory %s in %s has more than %d entries; only %d are looked at", dir, root.Path(), MaxDirEntries, MaxDirEntries)
	}
	present := make(map[string]bool, len(list))
	for _, e := range list {
		present[e.Name()] = true
	}
	type lib struct {
		file  string
		flags int32
	}
	bySoname := map[string]lib{}
	var order []string
	read := 0
	for _, e := range list {
		name := e.Name()
		if !candidate(name) {
			continue
		}
		if read++; read > MaxLibrariesPerDir {
			log.Warnf("library directory %s in %s has more than %d candidate libraries; the rest are skipped", dir, root.Path(), MaxLibrariesPerDir)
			break
		}
		var (
			soname string
			flags  int32
		)
		switch t := e.Type(); {
		case t.IsRegular():
			soname, flags, _, err = d.Read(name)
		case t&fs.ModeSymlink != 0:
			// As ldconfig: a link's target (inside the root) counts.
			var f *rootfs.File
			if f, err = root.OpenRegular(path.Join(dir, name)); err == nil {
				soname, flags, _, err = d.ReadOpen(f, path.Join(dir, name))
			}
		default:
			continue
		}
		if err != nil {
			log.Debugf("not a shared library with a SONAME: %s: %v", path.Join(dir, name), err)
			continue
		}
		if strings.ContainsRune(soname, '/') {
			log.Warnf("ignoring %s: its SONAME %q contains a slash", path.Join(dir, name), soname)
			continue
		}
		prev, ok := bySoname[soname]
		if !ok {
			order = append(order, soname)
		}
		if !ok || Libcmp(name, prev.file) > 0 {
			bySoname[soname] = lib{file: name, flags: flags}
		}
	}
	entries := make([]Entry, 0, len(order))
	for _, soname := range order {
		l := bySoname[soname]
		file := l.file
		if present[soname] {
			file = soname
		}
		entries = append(entries, Entry{Name: soname, Path: path.Join(dir, file), Flags: l.flags})
	}
	return entries, nil
}

// readLib returns the SONAME and cache flags of the ELF shared object at
// unsafePath inside root.
func readLib(sr *SonameReader, root *rootfs.Root, unsafePath string) (string, int32, error) {
	f, err := root.OpenRegular(unsafePath)
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = f.Close() }() // read-only
	return sr.Read(f)
}

// cacheFlags returns the flags ldconfig records for an ELF object of this
// class and machine (sysdeps/unix/sysv/linux/*/readelflib.c, dl-cache.h).
func cacheFlags(class elf.Class, machine elf.Machine, eflags uint32) int32 {
	is64 := class == elf.ELFCLASS64
	f := FlagELFLibc6
	switch machine {
	case elf.EM_X86_64:
		if is64 {
			return f | FlagX8664Lib64
		}
		return f | FlagX8664LibX32
	case elf.EM_AARCH64:
		if is64 {
			return f | FlagAArch64Lib64
		}
	case elf.EM_ARM:
		const efARMABIFloatHard, efARMABIFloatSoft = 0x400, 0x200
		switch {
		case eflags&efARMABIFloatHard != 0:
			return f | FlagARMLibHF
		case eflags&efARMABIFloatSoft != 0:
			return f | FlagARMLibSF
		}
	case elf.EM_PPC64:
		if is64 {
			return f | FlagPowerPCLib64
		}
	case elf.EM_S390:
		if is64 {
			return f | FlagS390Lib64
		}
	case elf.EM_SPARCV9:
		if is64 {
			return f | FlagSparcLib64
		}
	case elf.EM_IA_64:
		if is64 {
			return f | FlagIA64Lib64
		}
	case elf.EM_RISCV:
		const efRISCVFloatABI, soft, double = 0x6, 0x0, 0x4
		switch eflags & efRISCVFloatABI {
		case soft:
			return f | FlagRISCVFloatABISoft
		case double:
			return f | FlagRISCVFloatABIDouble
		}
	case elf.EM_LOONGARCH:
		const efLArchABIMask, soft, double = 0x7, 0x1, 0x3
		switch eflags & efLArchABIMask {
		case soft:
			return f | FlagLArchFloatABISoft
		case double:
			return f | FlagLArchFloatABIDouble
		}
	}
	return f
}
