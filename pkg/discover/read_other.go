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

func openELF(path string) (*os.File, error) { return os.Open(path) }

type libDir struct{ path string }

func openLibDir(path string) (*libDir, error) { return &libDir{path: path}, nil }

func (d *libDir) entries() ([]os.DirEntry, error) { return os.ReadDir(d.path) }

func (d *libDir) openFile(name, path string) (*os.File, error) { return os.Open(path) }

func (d *libDir) close() {}
