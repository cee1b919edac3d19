package cdicompat

import (
	"errors"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
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
// directories and whose extension is exactly ".json" or ".yaml". Unlike
// os.ReadDir, a directory is opened without blocking and must be one (a
// FIFO in its place is an error at once, not a hang).
func SpecFiles(dirs []string, visit func(dir, name string, err error) error) error {
	return walkSpecDirs(dirs, func(_ int, dir string, _ int, name string, err error) error {
		return visit(dir, name, err)
	})
}

// walkSpecDirs is SpecFiles that also gives visit the index of the
// directory in dirs (its priority) and its descriptor (valid during the
// call; -1 with ErrDirAbsent), so that the files are opened relative to
// the directory that was listed.
func walkSpecDirs(dirs []string, visit func(priority int, dir string, dirfd int, name string, err error) error) error {
	for i, dir := range dirs {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if err := visit(i, dir, -1, "", ErrDirAbsent); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return &os.PathError{Op: "open", Path: dir, Err: err}
		}
		f := os.NewFile(uintptr(fd), dir)
		entries, err := f.ReadDir(-1)
		if err != nil {
			_ = f.Close()
			return err
		}
		slices.SortFunc(entries, func(a, b os.DirEntry) int {
			switch {
			case a.Name() < b.Name():
				return -1
			case a.Name() > b.Name():
				return 1
			}
			return 0
		})
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); e.IsDir() || (ext != ".json" && ext != ".yaml") {
				continue
			}
			if err := visit(i, dir, int(f.Fd()), e.Name(), nil); err != nil {
				_ = f.Close()
				return err
			}
		}
		_ = f.Close()
	}
	return nil
}
