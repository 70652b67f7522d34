package policy

import (
	"github.com/svc-dev/svc/internal/jsonscan"

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
	i := jsonscan.SkipSpace(raw, 0)
	if i >= len(raw) {
		return nil, errJSONSyntax
	}
	var found []byte
	var err error
	switch raw[i] {
	case '{':
		err = members(raw[i:], func(key, val []byte) bool {
			if match, _ := jsonscan.KeyIs(key, k); match {
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

// members calls fn with the key (quoted) and value text of each member
// of the object at the start of b, until fn returns false.
func members(b []byte, fn func(key, val []byte) bool) error {
	i := jsonscan.SkipSpace(b, 1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for {
		i = jsonscan.SkipSpace(b, i)
		kend, ok := jsonscan.SkipValue(b, i)
		if !ok || b[i] != '"' {
			return errJSONSyntax
		}
		j := jsonscan.SkipSpace(b, kend)
		if j >= len(b) || b[j] != ':' {
			return errJSONSyntax
		}
		vstart := jsonscan.SkipSpace(b, j+1)
		vend, ok := jsonscan.SkipValue(b, vstart)
		if !ok {
			return errJSONSyntax
		}
		if !fn(b[i:kend], b[vstart:vend]) {
			return nil
		}
		var done bool
		var err error
		if i, done, err = afterValue(b, vend, '}'); err != nil || done {
			return err
		}
	}
}

// elements calls fn with the text of each element of the array at the
// start of b, until fn returns false.
func elements(b []byte, fn func(val []byte) bool) error {
	i := jsonscan.SkipSpace(b, 1)
	if i < len(b) && b[i] == ']' {
		return nil
	}
	for {
		start := jsonscan.SkipSpace(b, i)
		end, ok := jsonscan.SkipValue(b, start)
		if !ok {
			return errJSONSyntax
		}
		if !fn(b[start:end]) {
			return nil
		}
		var done bool
		var err error
		if i, done, err = afterValue(b, end, ']'); err != nil || done {
			return err
		}
	}
}

// afterValue reads what follows a member or element ending at b[i]: the
// object's or array's closing byte (done) or a comma, and returns where
// the next one starts.
func afterValue(b []byte, i int, closing byte) (next int, done bool, err error) {
	i = jsonscan.SkipSpace(b, i)
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
