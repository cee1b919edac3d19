package lookup

import (
	"errors"
	"fmt"
	"os"
	"path"

	securejoin "github.com/cyphar/filepath-securejoin"
)

// ErrNotFound is returned (wrapped) when a Locator finds nothing.
var ErrNotFound = errors.New("not found")

// Locator finds files by name.
type Locator interface {
	// Locate returns the in-root paths of the files called name, best first.
	Locate(name string) ([]string, error)
}

// Resolve returns the host path of the in-root path p below root, with every
// symlink resolved inside root.
func Resolve(root, p string) (string, error) {
	return securejoin.SecureJoin(root, p)
}

// fileLocator looks for regular files in a list of directories.
type fileLocator struct {
	root       string
	dirs       []string
	executable bool
	// res, when set, resolves and stats with its memory.
	res *Resolver
}

var _ Locator = (*fileLocator)(nil)

// NewFileLocator returns a Locator of regular files called name in dirs
// (in-root paths) below root. A name that is an absolute path is checked as
// it is.
func NewFileLocator(root string, dirs ...string) Locator {
	return &fileLocator{root: root, dirs: dirs}
}

// NewExecutableLocator is NewFileLocator for files with an execute bit.
func NewExecutableLocator(root string, dirs ...string) Locator {
	return &fileLocator{root: root, dirs: dirs, executable: true}
}

func (l *fileLocator) Locate(name string) ([]string, error) {
	candidates := []string{name}
	if !path.IsAbs(name) {
		candidates = candidates[:0]
		for _, d := range l.dirs {
			candidates = append(candidates, path.Join(d, name))
		}
	}
	var found []string
	for _, c := range candidates {
		st, err := l.stat(c)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if l.executable && st.Mode().Perm()&0o111 == 0 {
			continue
		}
		found = append(found, c)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("%s: %w", name, ErrNotFound)
	}
	return found, nil
}

// stat resolves the in-root path p and stats the file it names.
func (l *fileLocator) stat(p string) (os.FileInfo, error) {
	if l.res != nil {
		host, err := l.res.Resolve(p)
		if err != nil {
			return nil, err
		}
		return l.res.Stat(host)
	}
	host, err := Resolve(l.root, p)
	if err != nil {
		return nil, err
	}
	return os.Stat(host)
}
