package cdicompat

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
)

// SpecDirs returns the spec directories a Cache built with
// WithSpecDirs(dirs...) reads, in priority order (lowest first).
//
// Mirrors (library v1.1.2) WithSpecDirs: each directory filepath.Clean'ed;
// and NewCache: no directory means DefaultSpecDirs.
func SpecDirs(dirs []string) []string {
	if len(dirs) == 0 {
		dirs = cdiapi.DefaultSpecDirs
	}
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = filepath.Clean(d)
	}
	return out
}

// ErrDirAbsent is passed to SpecFiles' visit function for a spec directory
// that does not exist, which the library skips.
var ErrDirAbsent = errors.New("spec directory does not exist")

// SpecFiles calls visit for every file of dirs that the library reads as a
// spec, in the order it reads them; for a directory that does not exist,
// visit gets the directory, an empty name and ErrDirAbsent. A directory that
// cannot be listed ends the walk with its error, as in the library.
//
// Mirrors (library v1.1.2) scanSpecDirs: directories in the given order,
// os.ReadDir of each (entries sorted by name), entries that are not
// directories and whose extension is exactly ".json" or ".yaml".
func SpecFiles(dirs []string, visit func(dir, name string, err error) error) error {
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			if err := visit(dir, "", ErrDirAbsent); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); e.IsDir() || (ext != ".json" && ext != ".yaml") {
				continue
			}
			if err := visit(dir, e.Name(), nil); err != nil {
				return err
			}
		}
	}
	return nil
}
