//go:build !linux

package discover

import (
	"os"
	"path/filepath"
)

type attrDir struct{ path string }

func openAttrDir(path string) (*attrDir, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	return &attrDir{path: path}, nil
}

func (d *attrDir) close() {}

func (d *attrDir) read(name string) ([]byte, error) { return os.ReadFile(filepath.Join(d.path, name)) }

func (d *attrDir) readlink(name string) (string, error) {
	return os.Readlink(filepath.Join(d.path, name))
}

func readSmall(path string) ([]byte, error) { return os.ReadFile(path) }
