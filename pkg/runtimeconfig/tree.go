package runtimeconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// edit sets one key of a configuration tree (the map[string]any that both
// encoding/json and go-toml decode to).
type edit struct {
	key   []string
	value any
}

func (e edit) String() string { return strings.Join(e.key, ".") }

// stringList returns ss in the shape decoders produce ([]any), so that
// reflect.DeepEqual compares it with decoded values.
func stringList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// lookup returns the value at key and whether it exists.
func lookup(tree map[string]any, key []string) (any, bool) {
	var cur any = tree
	for _, k := range key {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// existingDepth is the number of leading components of key that exist as
// tables in tree.
func existingDepth(tree map[string]any, key []string) int {
	m := tree
	for i, k := range key[:len(key)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return i
		}
		m = next
	}
	return len(key) - 1
}

// set stores value at key, creating tables on the way. A non-table value in
// the way is an error naming the key.
func set(tree map[string]any, key []string, value any) error {
	m := tree
	for i, k := range key[:len(key)-1] {
		switch next := m[k].(type) {
		case map[string]any:
			m = next
		case nil:
			n := map[string]any{}
			m[k] = n
			m = n
		default:
			return fmt.Errorf("key %q holds a %T, not a table", strings.Join(key[:i+1], "."), next)
		}
	}
	m[key[len(key)-1]] = value
	return nil
}

// remove deletes key and then every now-empty table below depth keep.
func remove(tree map[string]any, key []string, keep int) {
	parents := []map[string]any{tree}
	m := tree
	for _, k := range key[:len(key)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return
		}
		parents = append(parents, next)
		m = next
	}
	delete(m, key[len(key)-1])
	for i := len(key) - 1; i > keep && i > 0; i-- {
		if len(parents[i]) != 0 {
			break
		}
		delete(parents[i-1], key[i-1])
	}
}

// deepCopy copies a decoded tree.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = deepCopy(x)
		}
		return out
	case []map[string]any:
		out := make([]map[string]any, len(t))
		for i, x := range t {
			out[i], _ = deepCopy(x).(map[string]any)
		}
		return out
	default:
		return v
	}
}

// parseTOML decodes b as TOML, wrapping errors with the file name and position.
func parseTOML(path string, b []byte) (map[string]any, error) {
	tree := map[string]any{}
	if err := toml.Unmarshal(b, &tree); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("%s:%d:%d does not parse as TOML (%w): %w; fix or restore the file and run again (nothing was changed)",
				path, row, col, ErrParse, err)
		}
		return nil, fmt.Errorf("%s does not parse as TOML (%w): %w; fix or restore the file and run again (nothing was changed)",
			path, ErrParse, err)
	}
	return tree, nil
}

// parseJSON decodes b as a JSON object, keeping numbers as written.
func parseJSON(path string, b []byte) (map[string]any, error) {
	tree := map[string]any{}
	if len(bytes.TrimSpace(b)) == 0 {
		return tree, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := offsetToLineCol(b, se.Offset)
			return nil, fmt.Errorf("%s:%d:%d does not parse as a JSON object (%w): %w; fix or restore the file and run again (nothing was changed)",
				path, line, col, ErrParse, err)
		}
		return nil, fmt.Errorf("%s does not parse as a JSON object (%w): %w; fix or restore the file and run again (nothing was changed)",
			path, ErrParse, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s holds more than one JSON value (%w); fix the file and run again (nothing was changed)", path, ErrParse)
	}
	return tree, nil
}

func offsetToLineCol(b []byte, off int64) (int, int) {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	line := 1 + bytes.Count(b[:off], []byte("\n"))
	col := int(off) - bytes.LastIndexByte(b[:off], '\n')
	return line, col
}

func encodeTOML(tree map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	enc := toml.NewEncoder(&buf)
	enc.SetIndentTables(true)
	if err := enc.Encode(tree); err != nil {
		return nil, fmt.Errorf("encoding TOML: %w", err)
	}
	return buf.Bytes(), nil
}

func encodeJSON(tree map[string]any) ([]byte, error) {
	b, err := json.MarshalIndent(tree, "", "    ")
	if err != nil {
		return nil, fmt.Errorf("encoding JSON: %w", err)
	}
	return append(b, '\n'), nil
}

// fromRecord converts a value read back from a revert record (json.Number
// for numbers) into what the target format's encoder expects.
func fromRecord(v any, forTOML bool) any {
	switch t := v.(type) {
	case json.Number:
		if !forTOML {
			return t
		}
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = fromRecord(x, forTOML)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = fromRecord(x, forTOML)
		}
		return out
	default:
		return v
	}
}

// sameValue compares a value in a tree with one this package sets or
// recorded, ignoring the number representation of the two decoders.
func sameValue(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
