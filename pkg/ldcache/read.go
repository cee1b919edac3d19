package ldcache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by ReadFile's error for anything but a regular
// file (a FIFO, a device, a socket, a directory).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by ReadFile's error for a file over its limit.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads the loader cache at path (a trusted host path, such as a
// driver root's /etc/ld.so.cache), refusing anything but a regular file of
// at most limit bytes. It opens without blocking (O_NONBLOCK), so a FIFO
// in its place is refused at once instead of hanging the caller, and reads
// no more than limit bytes even if the file grows meanwhile.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, fi.Mode().Type())
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, at most %d are read", path, ErrTooLarge, fi.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w: grew past %d bytes while read", path, ErrTooLarge, limit)
	}
	return data, nil
}
