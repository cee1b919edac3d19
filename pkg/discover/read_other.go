//go:build !linux

package discover

import (
	"os"
	"path/filepath"
)

type attrDir struct{ path string }

func (d *attrDir) close() {}

func (d *attrDir) read(name string) ([]byte, error) { return os.ReadFile(filepath.Join(d.path, name)) }

func (d *attrDir) readlink(name string) (string, error) {
	return os.Readlink(filepath.Join(d.path, name))
}

// hostRoot is the dev root; outside Linux paths are joined, not resolved
// inside it (discovery reads Linux hosts).
type hostRoot struct{ path string }

func newHostRoot(devRoot string) hostRoot { return hostRoot{path: devRoot} }

func (r hostRoot) close() {}

func (r hostRoot) HostPath(p string) string { return filepath.Join(r.path, filepath.FromSlash(p)) }

func (r hostRoot) openAttrDir(p string) (*attrDir, error) {
	if _, err := os.Stat(r.HostPath(p)); err != nil {
		return nil, err
	}
	return &attrDir{path: r.HostPath(p)}, nil
}

func (r hostRoot) readSmall(p string) ([]byte, error)      { return os.ReadFile(r.HostPath(p)) }
func (r hostRoot) stat(p string) (os.FileInfo, error)      { return os.Stat(r.HostPath(p)) }
func (r hostRoot) lstat(p string) (os.FileInfo, error)     { return os.Lstat(r.HostPath(p)) }
func (r hostRoot) readDir(p string) ([]os.DirEntry, error) { return os.ReadDir(r.HostPath(p)) }
