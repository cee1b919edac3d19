package runtimeconfig

import (
	"bytes"
	"fmt"
	"strings"
)

// markerPrefix starts every drop-in this package writes. Revert deletes a
// drop-in only when its first line starts with it.
const markerPrefix = "# Written by xpu-cdi runtime configure"

func dropInHeader(engine Engine) []byte {
	return fmt.Appendf(nil, "%s --runtime %s; `xpu-cdi runtime configure --revert` removes it.\n"+
		"# Generated file: edits are overwritten the next time the command runs.\n", markerPrefix, engine)
}

func isOurs(b []byte) bool { return bytes.HasPrefix(b, []byte(markerPrefix)) }

// dropInChange computes the change that writes tree as the drop-in at path,
// refusing to replace a file this package did not write.
func (c *Configurator) dropInChange(path string, tree map[string]any) (FileChange, error) {
	if err := checkDirChain(path); err != nil {
		return FileChange{}, err
	}
	old, err := readConfig(path)
	if err != nil {
		return FileChange{}, err
	}
	if old != nil {
		if _, err := parseTOML(path, old); err != nil {
			return FileChange{}, err
		}
		if !isOurs(old) {
			return FileChange{}, fmt.Errorf("%s exists and was not written by xpu-cdi (no %q header); move it away or pass --drop-in-file with another name: %w",
				path, markerPrefix, ErrNotOurs)
		}
	}
	body, err := encodeTOML(tree)
	if err != nil {
		return FileChange{}, fmt.Errorf("encoding %s: %w", path, err)
	}
	return FileChange{Path: path, Old: old, New: append(dropInHeader(c.engine), body...)}, nil
}

// dropInRemoval computes the change that deletes the drop-in at path if this
// package wrote it.
func dropInRemoval(path string) (*FileChange, error) {
	if err := checkDirChain(path); err != nil {
		return nil, err
	}
	old, err := readConfig(path)
	if err != nil || old == nil {
		return nil, err
	}
	if !isOurs(old) {
		return nil, fmt.Errorf("not removing %s: it was not written by xpu-cdi (first line is not %q): %w",
			path, strings.TrimSpace(markerPrefix), ErrNotOurs)
	}
	return &FileChange{Path: path, Old: old}, nil
}

// treeFromEdits builds a fresh tree holding the edits.
func treeFromEdits(edits []edit) (map[string]any, error) {
	tree := map[string]any{}
	for _, e := range edits {
		if err := set(tree, e.key, e.value); err != nil {
			return nil, err
		}
	}
	return tree, nil
}
