package runtimeconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/atomicfile"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// newFileMode is the mode of a configuration file this package creates.
const newFileMode = 0o644

// MaxConfigSize bounds an engine configuration file as this package reads
// it: real ones are a few KB to a few tens of KB (`crio config` with its
// comments), and the TOML parser's duplicate-key check is quadratic in the
// keys of a table: a flat file of 256 KB parses in 0.5 s, of 1 MB in 11 s,
// of 4 MB in 3 min.
const MaxConfigSize = 256 << 10

// ErrTooLarge is wrapped by the error for a configuration file over
// MaxConfigSize.
var ErrTooLarge = fdio.ErrTooLarge

// FileChange is one file a Plan writes or deletes.
type FileChange struct {
	// Path is the file's absolute path.
	Path string
	// Old is the current content; nil when the file does not exist.
	Old []byte
	// New is the content to write; nil means delete the file.
	New []byte
	// MaxPerm, when not 0, caps the file's mode: a file holding a copy of
	// (part of) another gets no more than that file's mode (a drop-in
	// copied from a 0600 config.toml, a revert record of a 0600
	// daemon.json).
	MaxPerm os.FileMode
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
	// Without following a link or blocking on a FIFO put there since the
	// Lstat, and bounded.
	b, _, err := fdio.ReadFileAt(unix.AT_FDCWD, path, path, unix.O_NOFOLLOW, MaxConfigSize)
	if errors.Is(err, fdio.ErrTooLarge) {
		return nil, fmt.Errorf("refusing to use %s: %w: engine configuration files are read up to %d bytes; is it the right file?", path, err, MaxConfigSize)
	}
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
	return writeFileAtomic(c.Path, c.New, c.MaxPerm)
}

// permOf is the mode of the file at path, 0 when it cannot be read (a
// missing file: nothing to copy the mode of).
func permOf(path string) os.FileMode {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0
	}
	return fi.Mode().Perm()
}

// checkDirChain refuses a drop-in path any of whose directories is a
// symbolic link: the drop-in would be written, or a file removed, where the
// link leads (a directory of someone else's choosing) rather than in the
// engine's configuration directory.
func checkDirChain(path string) error {
	for dir := filepath.Dir(filepath.Clean(path)); dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		fi, err := os.Lstat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // created by the write, as a directory
		}
		if err != nil {
			return fmt.Errorf("inspecting %s: %w", dir, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(dir)
			return fmt.Errorf("refusing to use %s: its directory %s is a symbolic link (to %q); pass the real path instead: %w",
				path, dir, target, ErrSymlink)
		}
	}
	return nil
}

// writeFileAtomic replaces path with data (pkg/atomicfile). The mode and
// owner of an existing path are kept; new files get newFileMode and missing
// directories 0755; either is capped at maxPerm when it is not 0. A symlink
// is refused with ErrSymlink.
func writeFileAtomic(path string, data []byte, maxPerm os.FileMode) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("refusing to replace %s: it is a symbolic link: %w", path, ErrSymlink)
	}
	return atomicfile.WriteFile(path, data, atomicfile.WithKeepMode(), atomicfile.WithPerm(newFileMode), atomicfile.WithMkdir(), atomicfile.WithMaxPerm(maxPerm))
}
