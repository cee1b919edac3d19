package exporter

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// maxProcValue bounds a read of a one-number procfs file.
const maxProcValue = 64

// readResetCount reads /proc/xpu/devN/reset_count below devRoot: the
// driver's count of resets of the device (4.x). A missing file is
// os.ErrNotExist; the read is bounded, non-blocking and regular files only.
func readResetCount(devRoot string, index int) (float64, error) {
	path := filepath.Join(devRoot, "proc", "xpu", "dev"+strconv.Itoa(index), "reset_count")
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }() // read-only
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxProcValue+1))
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) > maxProcValue {
		return 0, fmt.Errorf("%s: more than %d bytes", path, maxProcValue)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, errors.Unwrap(err))
	}
	return float64(n), nil
}
