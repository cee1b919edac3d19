package fakehost

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mknodChar creates a char device node with exactly the facts' mode and owner.
func mknodChar(path string, f NodeFacts) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	if err := unix.Mknod(path, unix.S_IFCHR|uint32(f.Mode.Perm()), int(unix.Mkdev(f.Major, f.Minor))); err != nil {
		return fmt.Errorf("mknod %s: %w", path, err)
	}
	if err := os.Chown(path, int(f.UID), int(f.GID)); err != nil {
		return fmt.Errorf("chown %s: %w", path, err)
	}
	if err := os.Chmod(path, f.Mode.Perm()); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	return nil
}

func isPermission(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)
}
