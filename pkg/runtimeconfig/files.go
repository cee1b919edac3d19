package runtimeconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

const (
	newFileMode = 0o644
	newDirMode  = 0o755
)

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
		return syncDir(filepath.Dir(c.Path))
	}
	return writeFileAtomic(c.Path, c.New)
}

// writeFileAtomic replaces path with data through a temp file in the same
// directory. The mode and owner of an existing path are kept; new files get
// newFileMode and missing directories newDirMode.
func writeFileAtomic(path string, data []byte) (retErr error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, newDirMode); err != nil {
		return fmt.Errorf("creating directory %s: %w", dir, err)
	}
	mode := fs.FileMode(newFileMode)
	uid, gid := -1, -1
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("refusing to replace %s: it is a symbolic link: %w", path, ErrSymlink)
		}
		mode = fi.Mode().Perm()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("inspecting %s: %w", path, err)
	}

	// CreateTemp uses O_CREATE|O_EXCL with a random name: it never follows
	// or reuses an existing (possibly planted) file.
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".xpu-cdi-*")
	if err != nil {
		return fmt.Errorf("creating temporary file next to %s: %w", path, err)
	}
	tmpName := tmp.Name()
	defer func() {
		if retErr != nil {
			_ = tmp.Close()
			_ = os.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", tmpName, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("setting mode of %s: %w", tmpName, err)
	}
	if uid >= 0 && (uid != os.Geteuid() || gid != os.Getegid()) {
		if err := tmp.Chown(uid, gid); err != nil {
			return fmt.Errorf("keeping owner %d:%d of %s: %w", uid, gid, path, err)
		}
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmpName, err)
	}
	if err := os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
