// Package jsonstr appends Go strings as JSON string literals, byte for
// byte as encoding/json writes them, without reflection or allocation:
// for the hand-written encoders of the hot paths (audit records, deny
// bodies).
package jsonstr

import "unicode/utf8"

const hex = "0123456789abcdef"

// Append appends s quoted as encoding/json quotes a string: '"', '\\' and
// control characters escaped (\b \f \n \r \t, others \u00xx), U+2028 and
// U+2029 escaped, invalid UTF-8 replaced by \ufffd; with html also '<',
// '>' and '&' (encoding/json's default, which SetEscapeHTML(false) turns
// off).
func Append(dst []byte, s string, html bool) []byte {
	dst = append(dst, '"')
	start := 0 // s[start:i] is pending, copied verbatim
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' && (!html || (c != '<' && c != '>' && c != '&')) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
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
