package hook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// maxStateSize bounds what is read from the runtime (stdin, config.json).
const maxStateSize = 16 << 20

// ReadState decodes the OCI container state the runtime writes to a hook's
// stdin.
func ReadState(r io.Reader) (*specs.State, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxStateSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading container state from stdin: %w", err)
	}
	if len(data) > maxStateSize {
		return nil, fmt.Errorf("container state on stdin is larger than %d bytes", maxStateSize)
	}
	var st specs.State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("decoding container state from stdin (is this run as an OCI hook?): %w", err)
	}
	if st.Bundle == "" {
		return nil, errors.New("container state on stdin has no bundle")
	}
	return &st, nil
}

// RootPath returns the host path of the container's root filesystem: the
// bundle's config.json root.path, relative to the bundle unless absolute.
func RootPath(st *specs.State) (string, error) {
	bundle := st.Bundle
	if !filepath.IsAbs(bundle) {
		return "", fmt.Errorf("bundle path %q in the container state is not absolute", bundle)
	}
	cfgPath := filepath.Join(bundle, "config.json")
	// Without blocking on a FIFO, regular files only, bounded.
	data, _, err := fdio.ReadFileAt(unix.AT_FDCWD, cfgPath, cfgPath, 0, maxStateSize)
	if err != nil {
		return "", fmt.Errorf("reading the bundle's config: %w", err)
	}
	var spec struct {
		Root *specs.Root `json:"root"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		return "", fmt.Errorf("decoding %s: %w", cfgPath, err)
	}
	if spec.Root == nil || spec.Root.Path == "" {
		return "", fmt.Errorf("%s has no root.path", cfgPath)
	}
	if filepath.IsAbs(spec.Root.Path) {
		return filepath.Clean(spec.Root.Path), nil
	}
	return filepath.Join(bundle, spec.Root.Path), nil
}
