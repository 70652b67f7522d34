// Package jsonscan finds its way through JSON text without decoding it:
// where a value ends, and whether a quoted key is a given string. It is
// for the code that reads or edits one part of a document (data lookups,
// masks) and skips the rest.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// SkipSpace returns the index of the first byte at or after i that is
// not JSON white space (len(b) when there is none).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

// IsSpace says whether c is JSON white space.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipValue returns the index just past the JSON value that starts at
// b[i]; ok is false when none ends there. It finds where the value ends
// and checks no more than it needs to: a string's escapes and a number's
// or literal's spelling are not checked.
func SkipValue(b []byte, i int) (end int, ok bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		for i++; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1, true
			}
		}
		return 0, false
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, true
				}
			case '"':
				end, ok := SkipValue(b, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			}
		}
		return 0, false
	}
	start := i
	for i < len(b) && !IsSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
		i++
	}
	return i, i > start
}

// KeyIs says whether the quoted JSON string raw is key, as decoding it
// would say (escapes read, invalid UTF-8 as U+FFFD); ok is false when
// raw is not a JSON string.
func KeyIs(raw []byte, key string) (match, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false, false
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body) == key, true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return false, false
	}
	return s == key, true
}
