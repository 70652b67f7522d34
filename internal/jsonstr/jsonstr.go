// Package jsonstr appends Go strings as JSON string literals, byte for
// byte as encoding/json writes them, without reflection or allocation:
// for the hand-written encoders of the hot paths (audit records, deny
// bodies).
package jsonstr

import (
	"slices"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// SortedKeys appends m's keys to buf, sorted: the order encoding/json
// writes a map's members in. Pass a buffer on the stack (var a [16]string;
// SortedKeys(a[:0], m)) to spare an allocation for small maps.
func SortedKeys[V any](buf []string, m map[string]V) []string {
	for k := range m {
		buf = append(buf, k)
	}
	slices.Sort(buf)
	return buf
}

// AppendEscapedASCII appends the escape of the ASCII byte c that a JSON
// string cannot hold as is: '"' and '\\' and control characters (\b \f
// \n \r \t, others \u00xx); any other byte as \u00xx, as encoding/json
// writes '<', '>' and '&'.
func AppendEscapedASCII(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
}

// Append appends s quoted as encoding/json quotes a string: '"', '\\' and
// control characters escaped (\b \f \n \r \t, others \u00xx), U+2028 and
// U+2029 escaped, invalid UTF-8 replaced by \ufffd; with html also '<',
// '>' and '&' (encoding/json's default, which SetEscapeHTML(false) turns
// off).
//
// Runs of bytes that need no escaping, the whole of most strings, are
// found eight bytes at a time and appended in one copy.
func Append(dst []byte, s string, html bool) []byte {
	safe := &safeSet
	if html {
		safe = &htmlSafeSet
	}
	dst = append(dst, '"')
	start := 0 // s[start:i] is pending, copied verbatim
	for i := 0; i < len(s); {
		for i+8 <= len(s) && clean8(load8(s, i), html) {
			i += 8
		}
		// Some byte of the next eight, if there are eight, needs a look.
		for end := min(i+8, len(s)); i < end && safe[s[i]]; {
			i++
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if safe[c] {
			// Not reached while clean8 is exact; the tables decide.
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			dst = AppendEscapedASCII(dst, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			// Valid JSON, but line terminators to JavaScript and to some
			// log shippers that split on them.
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// safeSet and htmlSafeSet tell, byte by byte, the ASCII characters that
// are written as they are, without and with HTML escaping. Bytes from
// 0x80 up are false: they start or continue UTF-8 sequences, which Append
// decodes.
var safeSet, htmlSafeSet = safeTables()

func safeTables() (plain, html [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		plain[c] = c != '"' && c != '\\'
		html[c] = plain[c] && c != '<' && c != '>' && c != '&'
	}
	return plain, html
}

// load8 reads s[i:i+8] as a little-endian word; the compiler makes it
// one load.
func load8(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// clean8 reports whether every byte of x is safe (safeSet, or
// htmlSafeSet with html): ASCII, not a control character, not '"' or
// '\\', and with html not '<', '>' or '&'. It is exact: a byte that is
// not safe always makes it false.
func clean8(x uint64, html bool) bool {
	// A byte b has its high bit set in (b - n) &^ b exactly when b < n
	// (for n <= 0x80), and in hasZero(b ^ c) exactly when b == c; borrows
	// can only mark further bytes when some byte already is marked, so
	// the test as a whole is exact.
	bad := x | (x - ones*' ') | hasZero(x^(ones*'"')) | hasZero(x^(ones*'\\'))
	if html {
		bad |= hasZero(x^(ones*'<')) | hasZero(x^(ones*'>')) | hasZero(x^(ones*'&'))
	}
	return bad&highs == 0
}

// hasZero has the high bit of some byte set exactly when some byte of x
// is zero.
func hasZero(x uint64) uint64 { return (x - ones) &^ x }
