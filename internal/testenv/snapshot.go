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
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		desc := info.Mode().String()
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + l
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
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
