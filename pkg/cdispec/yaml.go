package cdispec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// encodeYAML writes v as block-style YAML. v is marshalled to JSON first,
// so specs-go's json tags (identical to its yaml tags) choose the fields;
// the JSON tokens, in order, are then written as YAML. Strings that could
// read as anything but themselves are written as JSON strings, which are
// valid YAML double-quoted scalars.
//
// It exists for speed: the YAML library's emitter holds every event of the
// document in memory, which on hosts with many devices costs more than the
// rest of generate (figures in docs/benchmarks.md).
func encodeYAML(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	sc := &jsonScanner{data: data}
	root, err := sc.value()
	if err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if sc.pos != len(data) {
		return nil, errors.New("encoding YAML: trailing data after the document")
	}
	var buf bytes.Buffer
	buf.Grow(2 * len(data))
	buf.WriteString("---\n")
	switch root.kind {
	case kindMap:
		if len(root.keys) == 0 {
			buf.WriteString("{}\n")
		}
		writeMapping(&buf, root, 0, false)
	case kindSeq:
		if len(root.items) == 0 {
			buf.WriteString("[]\n")
		}
		writeSequence(&buf, root, 0)
	default:
		buf.WriteString(root.scalar)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

type nodeKind uint8

const (
	kindScalar nodeKind = iota
	kindMap
	kindSeq
)

type yamlNode struct {
	kind   nodeKind
	scalar string // YAML text of a scalar
	keys   []string
	values []*yamlNode
	items  []*yamlNode
}

// jsonScanner reads the compact JSON that encoding/json.Marshal writes (no
// insignificant white space) into yamlNodes, keeping the order of keys.
// It is not a general JSON parser: it only ever reads Marshal's output.
type jsonScanner struct {
	data []byte
	pos  int
	// Allocation savers: a spec repeats the same keys and short values
	// (options, types) for every mount and node, and its nodes number in
	// the thousands on hosts with hundreds of driver libraries.
	scalars map[string]string // JSON string -> YAML scalar, for keys and short strings
	slab    []yamlNode
}

// maxInterned bounds the strings whose YAML form is remembered: the
// repeated ones are short, paths are mostly unique.
const maxInterned = 16

// node returns a new node, from a slab.
func (sc *jsonScanner) node(k nodeKind) *yamlNode {
	if len(sc.slab) == cap(sc.slab) {
		sc.slab = make([]yamlNode, 0, 256)
	}
	sc.slab = append(sc.slab, yamlNode{kind: k})
	return &sc.slab[len(sc.slab)-1]
}

// scalar reads a JSON string and returns its YAML form; a short string
// without escapes seen before costs no allocation.
func (sc *jsonScanner) scalar() (string, error) {
	if pos := sc.pos; pos < len(sc.data) && sc.data[pos] == '"' {
		if q := bytes.IndexByte(sc.data[pos+1:], '"'); q >= 0 && q <= maxInterned {
			// The map holds decoded strings: the raw bytes are one only
			// when they hold no escape.
			if raw := sc.data[pos+1 : pos+1+q]; bytes.IndexByte(raw, '\\') < 0 {
				if y, ok := sc.scalars[string(raw)]; ok {
					sc.pos = pos + q + 2
					return y, nil
				}
			}
		}
	}
	s, err := sc.str()
	if err != nil {
		return "", err
	}
	y := yamlString(s)
	if len(s) <= maxInterned {
		if sc.scalars == nil {
			sc.scalars = make(map[string]string)
		}
		sc.scalars[s] = y
	}
	return y, nil
}

func (sc *jsonScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", sc.pos, fmt.Sprintf(format, args...))
}

func (sc *jsonScanner) value() (*yamlNode, error) {
	if sc.pos >= len(sc.data) {
		return nil, sc.errorf("unexpected end")
	}
	switch c := sc.data[sc.pos]; c {
	case '{':
		sc.pos++
		n := sc.node(kindMap)
		for sc.pos < len(sc.data) && sc.data[sc.pos] != '}' {
			if len(n.keys) > 0 {
				if err := sc.expect(','); err != nil {
					return nil, err
				}
			}
			key, err := sc.scalar()
			if err != nil {
				return nil, err
			}
			if err := sc.expect(':'); err != nil {
				return nil, err
			}
			v, err := sc.value()
			if err != nil {
				return nil, err
			}
			n.keys = append(n.keys, key)
			n.values = append(n.values, v)
		}
		return n, sc.expect('}')
	case '[':
		sc.pos++
		n := sc.node(kindSeq)
		for sc.pos < len(sc.data) && sc.data[sc.pos] != ']' {
			if len(n.items) > 0 {
				if err := sc.expect(','); err != nil {
					return nil, err
				}
			}
			v, err := sc.value()
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, v)
		}
		return n, sc.expect(']')
	case '"':
		y, err := sc.scalar()
		if err != nil {
			return nil, err
		}
		n := sc.node(kindScalar)
		n.scalar = y
		return n, nil
	default:
		// true, false, null or a number: the same text in YAML.
		start := sc.pos
		for sc.pos < len(sc.data) && !strings.ContainsRune(",]}", rune(sc.data[sc.pos])) {
			sc.pos++
		}
		if start == sc.pos {
			return nil, sc.errorf("unexpected %q", c)
		}
		n := sc.node(kindScalar)
		n.scalar = string(sc.data[start:sc.pos])
		return n, nil
	}
}

func (sc *jsonScanner) expect(c byte) error {
	if sc.pos >= len(sc.data) || sc.data[sc.pos] != c {
		return sc.errorf("want %q", c)
	}
	sc.pos++
	return nil
}

// str reads a JSON string; escapes are decoded by encoding/json.
func (sc *jsonScanner) str() (string, error) {
	if err := sc.expect('"'); err != nil {
		return "", err
	}
	start := sc.pos
	// Fast path: the next '"' ends the string when no '\\' comes before it.
	if q := bytes.IndexByte(sc.data[start:], '"'); q >= 0 && bytes.IndexByte(sc.data[start:start+q], '\\') < 0 {
		sc.pos = start + q + 1
		return string(sc.data[start : start+q]), nil
	}
	escaped := false
	for sc.pos < len(sc.data) {
		switch sc.data[sc.pos] {
		case '\\':
			escaped = true
			sc.pos += 2
			continue
		case '"':
			raw := sc.data[start:sc.pos]
			sc.pos++
			if !escaped {
				return string(raw), nil
			}
			var s string
			if err := json.Unmarshal(sc.data[start-1:sc.pos], &s); err != nil {
				return "", sc.errorf("string: %v", err)
			}
			return s, nil
		}
		sc.pos++
	}
	return "", sc.errorf("unterminated string")
}

// spaces serves indent: specs nest a few levels deep.
const spaces = "                                                                "

func indent(buf *bytes.Buffer, n int) {
	for n > len(spaces) {
		buf.WriteString(spaces)
		n -= len(spaces)
	}
	buf.WriteString(spaces[:n])
}

// writeMapping writes the keys of n at column col; with inline the first
// key follows a "- " already written.
func writeMapping(buf *bytes.Buffer, n *yamlNode, col int, inline bool) {
	for i, k := range n.keys {
		if i > 0 || !inline {
			indent(buf, col)
		}
		buf.WriteString(k)
		buf.WriteByte(':')
		writeAfterKey(buf, n.values[i], col)
	}
}

func writeAfterKey(buf *bytes.Buffer, v *yamlNode, col int) {
	switch {
	case v.kind == kindScalar:
		buf.WriteByte(' ')
		buf.WriteString(v.scalar)
		buf.WriteByte('\n')
	case v.kind == kindMap && len(v.keys) == 0:
		buf.WriteString(" {}\n")
	case v.kind == kindSeq && len(v.items) == 0:
		buf.WriteString(" []\n")
	case v.kind == kindMap:
		buf.WriteByte('\n')
		writeMapping(buf, v, col+2, false)
	default:
		buf.WriteByte('\n')
		writeSequence(buf, v, col+2)
	}
}

// writeSequence writes the items of n as "- " entries at column col.
func writeSequence(buf *bytes.Buffer, n *yamlNode, col int) {
	for _, it := range n.items {
		indent(buf, col)
		buf.WriteString("- ")
		switch {
		case it.kind == kindScalar:
			buf.WriteString(it.scalar)
			buf.WriteByte('\n')
		case it.kind == kindMap && len(it.keys) == 0:
			buf.WriteString("{}\n")
		case it.kind == kindSeq && len(it.items) == 0:
			buf.WriteString("[]\n")
		case it.kind == kindMap:
			writeMapping(buf, it, col+2, true)
		default:
			buf.WriteByte('\n')
			writeSequence(buf, it, col+2)
		}
	}
}

// yamlString returns s as a YAML scalar: plain where it cannot be read as
// anything else (a number, a boolean, null, an indicator), otherwise
// double-quoted, escaping what YAML does not allow raw.
func yamlString(s string) string {
	if plainSafe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case yamlPrintable(r):
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// yamlPrintable reports whether YAML allows r unescaped in a double-quoted
// scalar (the c-printable set, less line breaks).
func yamlPrintable(r rune) bool {
	switch {
	case r >= 0x20 && r <= 0x7e:
		return true
	case r >= 0xa0 && r <= 0xd7ff:
		return r != 0x2028 && r != 0x2029 // line separators
	case r >= 0xe000 && r <= 0xfffd:
		return r != 0xfeff
	case r >= 0x10000 && r <= 0x10ffff:
		return true
	}
	return false
}

// plainSafe accepts strings that start with a letter, '/' or '_' and hold
// only letters, digits and _ . / : = + @ -, minus the words YAML 1.1 or
// 1.2 read as booleans or null. ':' cannot be followed by a space (there
// are none) and the string cannot end in ':'.
func plainSafe(s string) bool {
	if s == "" || s[len(s)-1] == ':' {
		return false
	}
	switch c := s[0]; {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '/', c == '_':
	default:
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_', c == '.', c == '/', c == ':', c == '=', c == '+', c == '@', c == '-':
		default:
			return false
		}
	}
	if len(s) > len("false") { // the longest of the words below
		return true
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null":
		return false
	}
	return true
}
