// Package atomicfile replaces files so that a reader sees either the old
// content or the new one, never a mix, and a failure leaves the old file as
// it was.
//
// The new content goes to a temporary file created (O_EXCL) in the same
// directory, is synced and renamed over the target; the directory is synced
// after the rename. A target that is a directory or a
// symlink is refused rather than followed or clobbered.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

type options struct {
	perm      os.FileMode
	keepOwner bool
	mkdir     bool
	noSync    bool
	maxPerm   os.FileMode
}

// Option configures WriteFile.
type Option func(*options)

// WithPerm sets the mode of a new file (default 0644); see WithKeepMode.
func WithPerm(perm os.FileMode) Option { return func(o *options) { o.perm = perm } }

// WithKeepMode keeps the mode and owner of the file being replaced; a new
// file gets the WithPerm mode.
func WithKeepMode() Option { return func(o *options) { o.keepOwner = true } }

// WithMaxPerm caps the mode of the file written, new or kept (WithKeepMode),
// at max: a file that holds a copy of another gets no more than its mode.
func WithMaxPerm(max os.FileMode) Option { return func(o *options) { o.maxPerm = max } }

// WithMkdir creates the parent directories (0755) when missing.
func WithMkdir() Option { return func(o *options) { o.mkdir = true } }

// WithoutSync skips the fsyncs of the file and of its directory: the
// replacement stays atomic for readers but may not survive a crash. For
// transient files only, such as the config.json of a container bundle that
// is being created (a crash ends that creation anyway).
func WithoutSync() Option { return func(o *options) { o.noSync = true } }

// WriteFile atomically replaces path with data.
func WriteFile(path string, data []byte, opts ...Option) (err error) {
	o := &options{perm: 0o644}
	for _, opt := range opts {
		opt(o)
	}
	dir := filepath.Dir(path)
	perm := o.perm
	uid, gid := -1, -1
	st, statErr := os.Lstat(path)
	switch {
	case statErr == nil && !st.Mode().IsRegular():
		return fmt.Errorf("writing %s: %w (it is a %s)", path, fdio.ErrNotRegular, describe(st.Mode()))
	case statErr == nil && o.keepOwner:
		perm = st.Mode().Perm()
		uid, gid = owner(st)
	case statErr != nil && !errors.Is(statErr, fs.ErrNotExist):
		return fmt.Errorf("writing %s: %w", path, statErr)
	}
	if o.maxPerm != 0 {
		perm &= o.maxPerm
	}
	if o.mkdir {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("writing %s: creating directory: %w", path, err)
		}
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return failed(path, err)
	}
	tmpPath := tmp.Name()
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmpPath)
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return failed(path, err)
	}
	if err = tmp.Chmod(perm); err != nil {
		return failed(path, err)
	}
	if uid >= 0 {
		if err = tmp.Chown(uid, gid); err != nil {
			return failed(path, fmt.Errorf("keeping owner %d:%d on %s: %w", uid, gid, tmpPath, err))
		}
	}
	if !o.noSync {
		if err = tmp.Sync(); err != nil {
			return failed(path, err)
		}
	}
	if err = tmp.Close(); err != nil {
		return failed(path, err)
	}
	if err = os.Rename(tmpPath, path); err != nil {
		return failed(path, err)
	}
	if !o.noSync {
		return SyncDir(dir)
	}
	return nil
}

// failed names the target of a write that failed before its rename (the
// cause may name the temporary file only), and says it was not changed.
func failed(path string, err error) error {
	return fmt.Errorf("writing %s (left as it was): %w", path, err)
}

func describe(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeSymlink != 0:
		return "symlink"
	default:
		return "special file"
	}
}

// SyncDir makes a rename or removal in dir durable.
func SyncDir(dir string) error {
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
