package discover

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxTextLen bounds one value of host text after CleanText, in bytes.
const MaxTextLen = 256

// CleanText is the one sanitizer of the text discovery takes from the host
// (procfs info fields and state, driver versions) before any of it reaches
// a terminal (xpu-cdi info), a node label or a slice attribute: every
// rune that is not printable (C0 and C1 controls, so escape sequences;
// DEL; format characters such as the bidirectional overrides; line
// separators) and every byte that is not valid UTF-8 is written as a Go
// escape (\x1b, \u202e), a backslash as \\, and the result is cut, on a
// rune, to at most MaxTextLen bytes, ending in "..." when cut. Text that
// is printable ASCII and short, what the driver writes, is returned as it
// is, without allocating.
func CleanText(s string) string {
	if len(s) <= MaxTextLen && plainASCII(s) {
		return s
	}
	var b strings.Builder
	// fits is where the text is cut if it turns out too long: the end of
	// the last whole piece that leaves room for "...".
	fits := 0
	for i := 0; i < len(s) && b.Len() <= MaxTextLen; {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case r == '\\':
			b.WriteString(`\\`)
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
		if b.Len() <= MaxTextLen-len("...") {
			fits = b.Len()
		}
	}
	if b.Len() <= MaxTextLen {
		return b.String()
	}
	return b.String()[:fits] + "..."
}

// plainASCII reports whether s is printable ASCII without a backslash.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '\\' {
			return false
		}
	}
	return true
}

// firstLine returns the first line of data, without its surrounding
// space: a kernel one-value file ("RUNNING\n"); whatever follows a first
// line is not the value.
func firstLine(data []byte) string {
	s := string(data)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}
