package ldcache

import (
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// ErrTooLarge is wrapped by ReadFile's error for a file over its limit.
var ErrTooLarge = fdio.ErrTooLarge

// ReadFile reads the loader cache at path (a trusted host path, such as a
// driver root's /etc/ld.so.cache), refusing anything but a regular file of
// at most limit bytes, without blocking on a FIFO (fdio.ReadFileAt).
func ReadFile(path string, limit int64) ([]byte, error) {
	data, _, err := fdio.ReadFileAt(unix.AT_FDCWD, path, path, 0, limit)
	return data, err
}
