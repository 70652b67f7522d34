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
		if raw, err = child(raw, k); raw == nil || err != nil {
			return nil, false, err
		}
	}
	return raw, true, nil
}

// child returns the text of the member or element k of the value raw,
// nil when there is none.
func child(raw []byte, k string) ([]byte, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) {
		return nil, errJSONSyntax
	}
	var found []byte
	var err error
	switch raw[i] {
	case '{':
		err = members(raw[i:], func(key, val []byte) bool {
			if keyEquals(key, k) {
				found = val
			}
			return true
		})
	case '[':
		idx, ok := util.Atoi(k)
		if !ok || idx < 0 {
			return nil, nil
		}
		n := 0
		err = elements(raw[i:], func(val []byte) bool {
			if n == idx {
				found = val
				return false
			}
			n++
			return true
		})
	}
	return found, err
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
		var done bool
		if i, done, err = afterValue(b, vend, '}'); err != nil || done {
			return err
		}
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
		var done bool
		if i, done, err = afterValue(b, end, ']'); err != nil || done {
			return err
		}
	}
}

// afterValue reads what follows a member or element ending at b[i]: the
// object's or array's closing byte (done) or a comma, and returns where
// the next one starts.
func afterValue(b []byte, i int, closing byte) (next int, done bool, err error) {
	i = skipSpace(b, i)
	switch {
	case i >= len(b):
		return 0, false, errJSONSyntax
	case b[i] == closing:
		return i + 1, true, nil
	case b[i] == ',':
		return i + 1, false, nil
	}
	return 0, false, errJSONSyntax
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
