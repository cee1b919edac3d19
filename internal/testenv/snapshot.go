package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Snapshot describes every entry below dir, without following symlinks:
// path -> mode, then the SHA-256 of a regular file's content or a link's
// target. Two equal snapshots prove that nothing below dir changed.
func Snapshot(dir string) (map[string]string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", dir, err)
	}
	defer func() { _ = root.Close() }()
	out := map[string]string{}
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		p := filepath.Join(dir, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		desc := info.Mode().String()
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, err := root.Readlink(rel)
			if err != nil {
				return err
			}
			desc += " -> " + l
		case d.Type().IsRegular():
			data, err := root.ReadFile(rel)
			if err != nil {
				return err
			}
			h := sha256.Sum256(data)
			desc += " " + hex.EncodeToString(h[:])
		}
		out[p] = desc
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", dir, err)
	}
	return out, nil
}
