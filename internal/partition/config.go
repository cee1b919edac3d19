package partition

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// DefaultConfigFile is the node's layout, applied at boot by the host
// package (`xpu-cdi partition apply --config /etc/xpu-cdi/partitions.conf`).
const DefaultConfigFile = "/etc/xpu-cdi/partitions.conf"

// maxConfigSize bounds what is read of a layout file.
const maxConfigSize = 64 << 10

// ErrNoLayout is returned by ReadConfig for a file that holds only
// comments and blank lines: the node keeps its layout.
var ErrNoLayout = errors.New("no layout")

// ParseConfig reads a layout file: one layout, as --layout takes it; '#'
// starts a comment, blank lines are ignored, and entries may be spread over
// several lines (the lines are joined with commas).
func ParseConfig(data []byte) (Layout, error) {
	var parts []string
	for i, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		line = strings.TrimSuffix(line, ",")
		if _, err := ParseLayout(line); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		parts = append(parts, line)
	}
	if len(parts) == 0 {
		return nil, ErrNoLayout
	}
	return ParseLayout(strings.Join(parts, ","))
}

// ReadConfig reads the layout file at path (a regular file of at most 64
// KiB).
func ReadConfig(path string) (Layout, error) {
	data, _, err := fdio.ReadFileAt(unix.AT_FDCWD, path, path, 0, maxConfigSize)
	if err != nil {
		return nil, fmt.Errorf("reading the layout file: %w", err)
	}
	l, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}
