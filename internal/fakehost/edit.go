package fakehost

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// Tests reshape a built tree to imitate a broken or unusual host. Build
// writes the kernel's files read-only (0444, as procfs and sysfs show them;
// a PF's sriov_numvfs 0644, the kernel's mode for it),
// which only root's permission bypass lets os.WriteFile overwrite; these
// helpers work for the tree's owner whoever it is, and keep the file's mode.

// WriteFile replaces the contents of the in-tree file p (a path such as
// /proc/devices) with data, keeping its mode; a file that does not exist is
// created read-only, like the kernel files Build writes.
func (t *Tree) WriteFile(p string, data []byte) error {
	return t.rewrite(p, func(path string) error { return os.WriteFile(path, data, 0o444) })
}

// Truncate sets the size of the in-tree file p, keeping its mode (a larger
// size extends it sparsely, without writing the bytes).
func (t *Tree) Truncate(p string, size int64) error {
	return t.rewrite(p, func(path string) error { return os.Truncate(path, size) })
}

// rewrite runs change on the host path of p with the owner's write bit set,
// then restores the mode the file had.
func (t *Tree) rewrite(p string, change func(path string) error) error {
	path := t.Path(p)
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return change(path)
	case err != nil:
		return fmt.Errorf("fake host: %w", err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("fake host: %s: %w (%s)", path, fdio.ErrNotRegular, fi.Mode().Type())
	}
	mode := fi.Mode().Perm()
	if err := os.Chmod(path, mode|0o200); err != nil {
		return fmt.Errorf("fake host: making %s writable: %w", path, err)
	}
	changeErr := change(path)
	if err := os.Chmod(path, mode); err != nil && changeErr == nil {
		return fmt.Errorf("fake host: restoring the mode of %s: %w", path, err)
	}
	if changeErr != nil {
		return fmt.Errorf("fake host: %w", changeErr)
	}
	return nil
}
