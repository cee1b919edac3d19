package hook

import (
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/elfso"
	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// scanLibraries finds the ELF shared objects that have a DT_SONAME in each of dirs
// (paths inside root; not recursive) and returns cache entries for them the
// way ldconfig builds them: the key is the SONAME, the path is dir/SONAME
// when the directory has an entry of that name (usually the SONAME link),
// else the file itself; when several files of a directory share a SONAME
// and none is named by it, the one with the highest version (ldcache.Libcmp) wins.
// Entries come in the order of dirs, then by name. A missing directory is
// skipped (and logged); other errors are returned.
func scanLibraries(root *rootfs.Root, dirs []string, log logger.Interface) ([]ldcache.Entry, error) {
	var entries []ldcache.Entry
	seen := make(map[string]bool, len(dirs))
	for _, unsafeDir := range dirs {
		dir := path.Clean("/" + unsafeDir)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		found, err := scanDir(root, dir, log)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				log.Warnf("library directory %s does not exist in %s: %v", dir, root.Path(), err)
				continue
			}
			return nil, err
		}
		entries = append(entries, found...)
	}
	return entries, nil
}

// scanLibraryFiles returns cache entries for the given library files (paths inside
// root), each read alone: key its SONAME, path the file as given. A file
// that is missing or not a shared library with a usable SONAME is skipped
// with a warning. Files that give the same entry count once.
func scanLibraryFiles(root *rootfs.Root, files []string, log logger.Interface) []ldcache.Entry {
	var (
		sr      elfso.SonameReader
		entries []ldcache.Entry
	)
	for _, unsafePath := range files {
		p := path.Clean("/" + unsafePath)
		soname, flags, err := readLib(&sr, root, p)
		switch {
		case err != nil:
			log.Warnf("library %s in %s left out of the cache: %v", p, root.Path(), err)
			continue
		case strings.ContainsRune(soname, '/'):
			log.Warnf("library %s in %s left out of the cache: its SONAME %q contains a slash", p, root.Path(), soname)
			continue
		}
		e := ldcache.Entry{Name: soname, Path: p, Flags: flags}
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

func scanDir(root *rootfs.Root, dir string, log logger.Interface) ([]ldcache.Entry, error) {
	f, err := root.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	d := elfso.NewLibDir(f, path.Join(root.Path(), dir))
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
		if !ok || ldcache.Libcmp(name, prev.file) > 0 {
			bySoname[soname] = lib{file: name, flags: flags}
		}
	}
	entries := make([]ldcache.Entry, 0, len(order))
	for _, soname := range order {
		l := bySoname[soname]
		file := l.file
		if present[soname] {
			file = soname
		}
		entries = append(entries, ldcache.Entry{Name: soname, Path: path.Join(dir, file), Flags: l.flags})
	}
	return entries, nil
}

// readLib returns the SONAME and cache flags of the ELF shared object at
// unsafePath inside root.
func readLib(sr *elfso.SonameReader, root *rootfs.Root, unsafePath string) (string, int32, error) {
	f, err := root.OpenRegular(unsafePath)
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = f.Close() }() // read-only
	return sr.Read(f)
}
