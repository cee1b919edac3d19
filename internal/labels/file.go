package labels

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/atomicfile"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// DefaultDir is where NFD's local source reads feature files.
const DefaultDir = "/etc/kubernetes/node-feature-discovery/features.d"

// MaxFileSize is NFD's limit for a feature file.
const MaxFileSize = 64 << 10

// Result says what WriteFile did.
type Result int

const (
	// Unchanged: the file already held these labels.
	Unchanged Result = iota
	// Written: the file was created or replaced.
	Written
	// Removed: there were no labels and the file was removed.
	Removed
	// Absent: there were no labels and no file.
	Absent
)

// WriteFile makes the feature file path hold labels: replaced atomically
// when they differ from what it holds, removed when there are none. The
// name must not start with a dot (NFD ignores such files) and the
// directory must exist (NFD's own; a missing one means no NFD here).
func WriteFile(path string, labels []Label, writer string) (Result, error) {
	if strings.HasPrefix(filepath.Base(path), ".") {
		return Unchanged, fmt.Errorf("feature file %s: NFD ignores files whose name starts with a dot; choose another name", path)
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return Unchanged, fmt.Errorf("feature file %s: its directory: %w (is Node Feature Discovery installed? Its local source reads %s)", path, err, DefaultDir)
	}
	// The old file is read as every host file is (fdio): a FIFO or a link
	// to a device there is refused at once, not read until it ends.
	old, _, err := fdio.ReadFileAt(unix.AT_FDCWD, path, path, 0, MaxFileSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		old = nil
		if len(labels) == 0 {
			return Absent, nil
		}
	case errors.Is(err, fdio.ErrTooLarge):
		old = nil // NFD does not read it: replaced (or removed) below
	case err != nil:
		return Unchanged, fmt.Errorf("reading feature file %s: %w (remove it: xpu-cdi writes a regular file there)", path, err)
	}
	if len(labels) == 0 {
		if err := os.Remove(path); err != nil {
			return Unchanged, fmt.Errorf("removing feature file %s: %w", path, err)
		}
		return Removed, nil
	}
	data, err := Encode(labels, writer)
	if err != nil {
		return Unchanged, fmt.Errorf("feature file %s: %w", path, err)
	}
	if bytes.Equal(old, data) {
		return Unchanged, nil
	}
	if err := atomicfile.WriteFile(path, data, atomicfile.WithPerm(0o644)); err != nil {
		return Unchanged, err
	}
	return Written, nil
}

// Encode is Format, refusing what NFD would not read (above MaxFileSize).
func Encode(labels []Label, writer string) ([]byte, error) {
	data := Format(labels, writer)
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%d bytes is above NFD's limit of %d", len(data), MaxFileSize)
	}
	return data, nil
}
