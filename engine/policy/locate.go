package policy

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/util"
)

// locate returns the text of the value at path within the JSON text raw,
// skipping over the values around it rather than decoding them, so that a
// read of data.plans[p].actions[a] decodes one member, not the whole plan.
// Object members are found by key (the last of equal keys, as decoding
// keeps), array elements by index as the in-memory store takes them. ok is
// false when the path does not exist; err is non-nil for text that is not
// JSON.
func locate(raw []byte, path storage.Path) (sub []byte, ok bool, err error) {
	for _, k := range path {
		i := skipSpace(raw, 0)
		if i >= len(raw) {
			return nil, false, errJSONSyntax
		}
		switch raw[i] {
		case '{':
			var found []byte
			err := members(raw[i:], func(key, val []byte) bool {
				if keyEquals(key, k) {
					found = val
				}
				return true
			})
			if err != nil {
				return nil, false, err
			}
			if found == nil {
				return nil, false, nil
			}
			raw = found
		case '[':
			idx, ok := util.Atoi(k)
			if !ok || idx < 0 {
				return nil, false, nil
			}
			var found []byte
			n := 0
			err := elements(raw[i:], func(val []byte) bool {
				if n == idx {
					found = val
					return false
				}
				n++
				return true
			})
			if err != nil {
				return nil, false, err
			}
			if found == nil {
				return nil, false, nil
			}
			raw = found
		default:
			return nil, false, nil
		}
	}
	return raw, true, nil
}

// keyEquals says whether the JSON string key (quotes included) is k.
func keyEquals(key []byte, k string) bool {
	body := key[1 : len(key)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body) == k
	}
	var s string
	return json.Unmarshal(key, &s) == nil && s == k
}

// members calls fn with the key (quoted) and value text of each member
// of the object at the start of b, until fn returns false.
func members(b []byte, fn func(key, val []byte) bool) error {
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for {
		i = skipSpace(b, i)
		kend, err := skipValue(b, i)
		if err != nil || b[i] != '"' {
			return errJSONSyntax
		}
		j := skipSpace(b, kend)
		if j >= len(b) || b[j] != ':' {
			return errJSONSyntax
		}
		vstart := skipSpace(b, j+1)
		vend, err := skipValue(b, vstart)
		if err != nil {
			return err
		}
		if !fn(b[i:kend], b[vstart:vend]) {
			return nil
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return errJSONSyntax
		}
		if b[i] == '}' {
			return nil
		}
		if b[i] != ',' {
			return errJSONSyntax
		}
		i++
	}
}

// elements calls fn with the text of each element of the array at the
// start of b, until fn returns false.
func elements(b []byte, fn func(val []byte) bool) error {
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == ']' {
		return nil
	}
	for {
		start := skipSpace(b, i)
		end, err := skipValue(b, start)
		if err != nil {
			return err
		}
		if !fn(b[start:end]) {
			return nil
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return errJSONSyntax
		}
		if b[i] == ']' {
			return nil
		}
		if b[i] != ',' {
			return errJSONSyntax
		}
		i++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errJSONSyntax
	}
	switch b[i] {
	case '"':
		for i++; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1, nil
			}
		}
		return 0, errJSONSyntax
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, err := skipValue(b, i)
				if err != nil {
					return 0, err
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, errJSONSyntax
	default:
		start := i
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\r' && b[i] != '\n' {
			i++
		}
		if i == start {
			return 0, errJSONSyntax
		}
		return i, nil
	}
}
