package runtimeconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
)

// recordSuffix names the file, next to an engine's main configuration, that
// remembers what an in-place edit changed so that Revert can undo exactly
// that.
const recordSuffix = ".xpu-cdi-revert.json"

// revertRecord is stored as JSON next to a file edited in place.
type revertRecord struct {
	// File is the edited file.
	File string `json:"file"`
	// Existed says whether File existed before the first edit.
	Existed bool `json:"existed"`
	// Original is File's content before the first edit.
	Original string `json:"original"`
	// WrittenSHA256 is the digest of the last content written. When File
	// still has it, Revert restores Original byte for byte.
	WrittenSHA256 string `json:"written_sha256"`
	// Edits lists each key set, with what it held before.
	Edits []recordedEdit `json:"edits"`
}

type recordedEdit struct {
	Key []string `json:"key"`
	Set any      `json:"set"`
	// Had says whether the key existed before; Prior is its value then.
	Had   bool `json:"had"`
	Prior any  `json:"prior,omitempty"`
	// Keep is the number of leading tables of Key that existed before.
	Keep int `json:"keep"`
}

type format struct {
	name   string
	parse  func(path string, b []byte) (map[string]any, error)
	encode func(map[string]any) ([]byte, error)
	toml   bool
}

var (
	jsonFormat = format{name: "JSON", parse: parseJSON, encode: encodeJSON}
	tomlFormat = format{name: "TOML", parse: parseTOML, encode: encodeTOML, toml: true}
)

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func readRecord(path string) (*revertRecord, []byte, error) {
	b, err := readConfig(path)
	if err != nil || b == nil {
		return nil, b, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var r revertRecord
	if err := dec.Decode(&r); err != nil {
		return nil, nil, fmt.Errorf("%s (xpu-cdi's record of its edits) does not parse (%w): %w; remove it only if you have reverted the edits by hand",
			path, ErrParse, err)
	}
	return &r, b, nil
}

// inPlaceConfigure applies edits to the file at path, adding a change for the
// file and one for its revert record.
func (c *Configurator) inPlaceConfigure(p *Plan, path string, f format, edits []edit) error {
	old, err := readConfig(path)
	if err != nil {
		return err
	}
	tree := map[string]any{}
	if old != nil {
		if tree, err = f.parse(path, old); err != nil {
			return err
		}
	}
	recPath := path + recordSuffix
	rec, recOld, err := readRecord(recPath)
	if err != nil {
		return err
	}
	if rec == nil {
		rec = &revertRecord{File: path, Existed: old != nil, Original: string(old)}
	}

	changed := false
	for _, e := range edits {
		cur, had := lookup(tree, e.key)
		if had && sameValue(cur, e.value) {
			continue
		}
		keep := existingDepth(tree, e.key)
		if err := set(tree, e.key, e.value); err != nil {
			return fmt.Errorf("%s: %w; fix the file and run again", path, err)
		}
		changed = true
		if i := slices.IndexFunc(rec.Edits, func(r recordedEdit) bool { return slices.Equal(r.Key, e.key) }); i >= 0 {
			// Set again after an earlier run (value changed since): keep
			// the first prior, which is what revert must restore.
			rec.Edits[i].Set = e.value
			continue
		}
		rec.Edits = append(rec.Edits, recordedEdit{Key: e.key, Set: e.value, Had: had, Prior: deepCopy(cur), Keep: keep})
	}
	if !changed {
		p.Changes = append(p.Changes, FileChange{Path: path, Old: old, New: old})
		return nil
	}
	out, err := f.encode(tree)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	rec.WrittenSHA256 = digest(out)
	recBytes, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", recPath, err)
	}
	recBytes = append(recBytes, '\n')
	// The record goes first: should the second write fail, a revert still
	// knows what may have been set.
	p.Changes = append(p.Changes,
		// The record holds the original file: no more readable than it.
		FileChange{Path: recPath, Old: recOld, New: recBytes, MaxPerm: permOf(path)},
		FileChange{Path: path, Old: old, New: out})
	return nil
}

// inPlaceRevert undoes what the revert record next to path says was set.
func (c *Configurator) inPlaceRevert(p *Plan, path string, f format) error {
	recPath := path + recordSuffix
	rec, recOld, err := readRecord(recPath)
	if err != nil {
		return err
	}
	if rec == nil {
		p.Notes = append(p.Notes, fmt.Sprintf("%s: no record of an xpu-cdi edit (%s absent): nothing to revert", path, recPath))
		return nil
	}
	old, err := readConfig(path)
	if err != nil {
		return err
	}
	removeRec := FileChange{Path: recPath, Old: recOld}
	if old != nil && digest(old) == rec.WrittenSHA256 {
		// Untouched since we wrote it: restore the original bytes.
		fc := FileChange{Path: path, Old: old}
		if rec.Existed {
			fc.New = []byte(rec.Original)
		}
		p.Changes = append(p.Changes, fc, removeRec)
		return nil
	}
	if old == nil {
		p.Notes = append(p.Notes, fmt.Sprintf("%s no longer exists: only the record %s is removed", path, recPath))
		p.Changes = append(p.Changes, removeRec)
		return nil
	}
	tree, err := f.parse(path, old)
	if err != nil {
		return err
	}
	reverted := 0
	for i := len(rec.Edits) - 1; i >= 0; i-- {
		e := rec.Edits[i]
		cur, ok := lookup(tree, e.Key)
		if !ok || !sameValue(cur, fromRecord(e.Set, f.toml)) {
			p.Notes = append(p.Notes, fmt.Sprintf("%s: %v does not hold what xpu-cdi set (changed since, or never written): left as it is", path, e.Key))
			continue
		}
		reverted++
		if e.Had {
			if err := set(tree, e.Key, fromRecord(e.Prior, f.toml)); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			continue
		}
		remove(tree, e.Key, e.Keep)
	}
	if reverted == 0 {
		// Nothing of ours in the file (say a configure whose write of
		// it failed after its record was written): never re-encode a
		// file whose content does not change.
		p.Notes = append(p.Notes, fmt.Sprintf("%s: holds nothing xpu-cdi set: left byte for byte as it is; only the record %s is removed", path, recPath))
		p.Changes = append(p.Changes, removeRec)
		return nil
	}
	out, err := f.encode(tree)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	p.Changes = append(p.Changes, FileChange{Path: path, Old: old, New: out}, removeRec)
	return nil
}
