package ldcache

import "runtime"

// charIsSigned reports whether C's plain char is signed for the architecture
// this binary runs on; glibc's comparison depends on it for bytes >= 0x80.
var charIsSigned = map[string]bool{"386": true, "amd64": true}[runtime.GOARCH]

// cchar returns byte b as the C compiler would see a plain char.
func cchar(b byte) int32 {
	if charIsSigned {
		return int32(int8(b))
	}
	return int32(b)
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// Libcmp is glibc's _dl_cache_libcmp: it compares library names with runs
// of digits compared as numbers (so libfoo.so.10 sorts after libfoo.so.9).
// Like the C code, it uses int arithmetic that wraps on overflow, so that the
// order matches the loader's even for hostile names.
func Libcmp(a, b string) int {
	i, j := 0, 0
	at := func(s string, k int) byte {
		if k < len(s) {
			return s[k]
		}
		return 0
	}
	for at(a, i) != 0 {
		p1, p2 := at(a, i), at(b, j)
		switch {
		case isDigit(p1):
			if !isDigit(p2) {
				return 1
			}
			var v1, v2 int32
			for ; isDigit(at(a, i)); i++ {
				v1 = v1*10 + int32(at(a, i)-'0')
			}
			for ; isDigit(at(b, j)); j++ {
				v2 = v2*10 + int32(at(b, j)-'0')
			}
			if v1 != v2 {
				return sign(v1 - v2)
			}
		case isDigit(p2):
			return -1
		case p1 != p2:
			return sign(cchar(p1) - cchar(p2))
		default:
			i++
			j++
		}
	}
	return sign(cchar(at(a, i)) - cchar(at(b, j)))
}

func sign(v int32) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}
