package cdispec

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/internal/atomicfile"
	"github.com/xpu-cdi/xpu-cdi/internal/cdicompat"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// Format is the encoding of a spec file.
type Format string

// The spec encodings CDI runtimes read.
const (
	FormatYAML Format = "yaml"
	FormatJSON Format = "json"
)

// ParseFormat validates a format name.
func ParseFormat(s string) (Format, error) {
	switch Format(strings.ToLower(s)) {
	case FormatYAML:
		return FormatYAML, nil
	case FormatJSON:
		return FormatJSON, nil
	}
	return "", fmt.Errorf("unknown spec format %q (valid: yaml, json)", s)
}

// FormatForPath returns the format a runtime infers from a file name; files
// that are neither .yaml nor .json are never read by CDI runtimes.
func FormatForPath(path string) (Format, error) {
	switch filepath.Ext(path) {
	case ".yaml":
		return FormatYAML, nil
	case ".json":
		return FormatJSON, nil
	}
	return "", fmt.Errorf("%s: CDI runtimes only read files ending in .yaml or .json", path)
}

// Encode serializes a spec (JSON, or the block YAML of encodeYAML).
func Encode(spec *specs.Spec, f Format) ([]byte, error) {
	switch f {
	case FormatJSON:
		data, err := json.MarshalIndent(spec, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encoding spec as JSON: %w", err)
		}
		return append(data, '\n'), nil
	case FormatYAML:
		data, err := encodeYAML(spec)
		if err != nil {
			return nil, fmt.Errorf("encoding spec as YAML: %w", err)
		}
		return data, nil
	}
	return nil, fmt.Errorf("unknown spec format %q", f)
}

// ValidateFile checks a spec file the way CDI runtimes load it: strict
// parsing, version check against its content, names and edits
// (cdicompat.ResolveSpecs, the library's loading). The file is read as
// every spec file is (bounded, without blocking: a FIFO is an error).
func ValidateFile(path string) error {
	data, _, err := fdio.ReadFileAt(unix.AT_FDCWD, path, path, 0, cdicompat.MaxSpecSize)
	if err == nil {
		f := cdicompat.SpecFile{Dir: filepath.Dir(path), Name: filepath.Base(path), Data: data}
		err = cdicompat.ResolveSpecs([]cdicompat.SpecFile{f}).Err()
	}
	if err != nil {
		return fmt.Errorf("invalid CDI spec %s: %w", path, err)
	}
	return nil
}

// WriteFile validates (ValidateSpec), encodes and atomically writes a spec,
// mode 0644 so that rootless engines can read it, creating the directory
// when missing. On any failure an existing file at path is left untouched.
func WriteFile(path string, spec *specs.Spec, f Format) error {
	if err := ValidateSpec(spec); err != nil {
		return fmt.Errorf("refusing to write %s: %w", path, err)
	}
	data, err := Encode(spec, f)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, atomicfile.WithPerm(0o644), atomicfile.WithMkdir())
}

// Parse decodes spec data strictly, as CDI runtimes do.
func Parse(data []byte) (*specs.Spec, error) {
	raw, err := cdiapi.ParseSpec(data)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, errors.New("empty CDI spec")
	}
	return raw, nil
}
