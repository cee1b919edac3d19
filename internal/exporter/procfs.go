package exporter

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// maxProcValue bounds a read of a one-number procfs file.
const maxProcValue = 64

// readResetCount reads /proc/xpu/devN/reset_count below the dev root: the
// driver's count of resets of the device (4.x). A missing file is
// os.ErrNotExist; every directory on the way is resolved inside the root
// (a symlinked /proc/xpu cannot lead the read out of it), the file itself
// is never a symlink, and the read is bounded, non-blocking and of regular
// files only.
func readResetCount(root *fdio.Root, index int) (float64, error) {
	p := "/proc/xpu/dev" + strconv.Itoa(index) + "/reset_count"
	path := root.HostPath(p)
	fd, _, err := root.OpenRegular(p)
	if err != nil {
		return 0, err
	}
	defer func() { _ = unix.Close(fd) }() // read-only
	b := make([]byte, maxProcValue+1)
	n, err := fdio.ReadFullAt(fd, path, b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	if n > maxProcValue {
		return 0, fmt.Errorf("%s: more than %d bytes", path, maxProcValue)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b[:n])), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, errors.Unwrap(err))
	}
	return float64(v), nil
}
