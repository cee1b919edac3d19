package runtimeconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/xpu-cdi/xpu-cdi/internal/atomicfile"
)

// newFileMode is the mode of a configuration file this package creates.
const newFileMode = 0o644

// FileChange is one file a Plan writes or deletes.
type FileChange struct {
	// Path is the file's absolute path.
	Path string
	// Old is the current content; nil when the file does not exist.
	Old []byte
	// New is the content to write; nil means delete the file.
	New []byte
}

// Changed reports whether applying the change would alter the file.
func (c FileChange) Changed() bool {
	if c.New == nil {
		return c.Old != nil
	}
	return c.Old == nil || !bytes.Equal(c.Old, c.New)
}

// Delete reports whether the change removes the file.
func (c FileChange) Delete() bool { return c.New == nil && c.Old != nil }

// readConfig reads path, refusing symbolic links. A missing file yields
// (nil, nil).
func readConfig(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspecting %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(path)
		return nil, fmt.Errorf("refusing to use %s: it is a symbolic link (to %q); pass the real file's path instead: %w",
			path, target, ErrSymlink)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("refusing to use %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// apply performs one change. It re-checks that the file still holds Old so
// that a concurrent edit is not silently overwritten.
func (c FileChange) apply() error {
	if !c.Changed() {
		return nil
	}
	cur, err := readConfig(c.Path)
	if err != nil {
		return err
	}
	if (cur == nil) != (c.Old == nil) || !bytes.Equal(cur, c.Old) {
		return fmt.Errorf("%s changed while it was being configured; run the command again: %w", c.Path, ErrConcurrentEdit)
	}
	if c.New == nil {
		if err := os.Remove(c.Path); err != nil {
			return fmt.Errorf("removing %s: %w", c.Path, err)
		}
		return atomicfile.SyncDir(filepath.Dir(c.Path))
	}
	return writeFileAtomic(c.Path, c.New)
}

// writeFileAtomic replaces path with data (pkg/atomicfile). The mode and
// owner of an existing path are kept; new files get newFileMode and missing
// directories 0755. A symlink is refused with ErrSymlink.
func writeFileAtomic(path string, data []byte) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("refusing to replace %s: it is a symbolic link: %w", path, ErrSymlink)
	}
	return atomicfile.WriteFile(path, data, atomicfile.WithKeepMode(), atomicfile.WithPerm(newFileMode), atomicfile.WithMkdir())
}
