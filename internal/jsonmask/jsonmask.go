// Package jsonmask erases the values that JSON pointers (RFC 6901) name
// from a JSON object, as OPA's decision log masks remove them: a member
// is deleted from its object, an element is cut out of its array (the
// elements after it move up one place), a pointer that names nothing is
// skipped, and the pointers that did erase something are listed, in the
// order given, in the object's "erased" member.
package jsonmask

import (
	"errors"
	"fmt"
	"strings"

	"github.com/svc-dev/svc/internal/jsonscan"

	"github.com/svc-dev/svc/internal/jsonstr"
)

// Erased is the member of a masked object that lists the pointers that
// erased something. It cannot itself be masked.
const Erased = "erased"

// Error is a pointer that is not a valid JSON pointer for a mask.
type Error struct {
	// Pointer is the pointer as written.
	Pointer string
	// Msg says what is wrong with it.
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("%q %s", e.Pointer, e.Msg) }

// Mask is a list of JSON pointers to erase. The nil *Mask erases
// nothing. A Mask is immutable and safe for concurrent use.
type Mask struct {
	ptrs []pointer
}

// pointer is a parsed JSON pointer: its text and its unescaped tokens.
type pointer struct {
	raw    string
	tokens []string
}

// Parse returns the Mask of pointers, nil when there are none. Each
// pointer must start with "/", escape "~" and "/" in its tokens as "~0"
// and "~1" only, and not name the root object's "erased" member.
func Parse(pointers []string) (*Mask, error) {
	if len(pointers) == 0 {
		return nil, nil
	}
	m := &Mask{ptrs: make([]pointer, 0, len(pointers))}
	for _, p := range pointers {
		tokens, err := ParsePointer(p)
		if err != nil {
			return nil, err
		}
		m.ptrs = append(m.ptrs, pointer{raw: p, tokens: tokens})
	}
	return m, nil
}

// ParsePointer returns the unescaped tokens of the JSON pointer p, or an
// *Error when p is not a valid pointer for a mask (see Parse).
func ParsePointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, &Error{Pointer: p, Msg: `must start with "/" (a JSON pointer such as "/input/request/headers/x-ssn")`}
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, &Error{Pointer: p, Msg: `has a "~" that is not "~0" (for "~") or "~1" (for "/")`}
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	if len(parts) == 1 && parts[0] == Erased {
		return nil, &Error{Pointer: p, Msg: `names the "erased" list itself`}
	}
	return parts, nil
}

// Empty reports whether m erases nothing.
func (m *Mask) Empty() bool { return m == nil || len(m.ptrs) == 0 }

// Pointers returns the pointers of m as written.
func (m *Mask) Pointers() []string {
	if m == nil {
		return nil
	}
	out := make([]string, len(m.ptrs))
	for i, p := range m.ptrs {
		out[i] = p.raw
	}
	return out
}

// Apply erases the values m names from the JSON object doc. When it
// erases something it returns a new slice: doc without the erased
// members and elements (the rest byte for byte, in its order) and with
// "erased", listing the pointers that did, as the object's last member;
// when nothing is erased it returns doc itself and false. doc is never
// modified and must not have an "erased" member of its own. The error is
// doc not being a JSON object.
func (m *Mask) Apply(doc []byte) ([]byte, bool, error) {
	if m.Empty() {
		return doc, false, nil
	}
	root := jsonscan.SkipSpace(doc, 0)
	if root >= len(doc) || doc[root] != '{' {
		return nil, false, errNotObject
	}
	var erased []string
	for _, p := range m.ptrs {
		from, to, err := locate(doc, root, p.tokens)
		if err != nil {
			return nil, false, err
		}
		if from < 0 {
			continue
		}
		out := make([]byte, 0, len(doc)-(to-from)+64)
		doc = append(append(out, doc[:from]...), doc[to:]...)
		erased = append(erased, p.raw)
	}
	if len(erased) == 0 {
		return doc, false, nil
	}
	end := len(doc) - 1
	for end > root && jsonscan.IsSpace(doc[end]) {
		end--
	}
	if doc[end] != '}' {
		return nil, false, errNotObject
	}
	tail := doc[end:]
	out := doc[:end:end]
	if jsonscan.SkipSpace(doc, root+1) != end {
		out = append(out, ',')
	}
	out = append(out, `"`+Erased+`":[`...)
	for i, p := range erased {
		if i > 0 {
			out = append(out, ',')
		}
		out = jsonstr.Append(out, p, false)
	}
	out = append(out, ']')
	return append(out, tail...), true, nil
}

var errNotObject = errors.New("jsonmask: not a JSON object")

// locate returns the span of doc to cut to erase what tokens name under
// the object or array that starts at doc[at], with one separating comma;
// from is -1 when tokens name nothing.
func locate(doc []byte, at int, tokens []string) (from, to int, err error) {
	for {
		t, last := tokens[0], len(tokens) == 1
		tokens = tokens[1:]
		var sep, vs, ve int
		var ok bool
		switch doc[at] {
		case '{':
			sep, vs, ve, ok, err = member(doc, at, t)
		case '[':
			sep, vs, ve, ok, err = element(doc, at, t)
		default:
			return -1, -1, nil
		}
		if err != nil || !ok {
			return -1, -1, err
		}
		if !last {
			at = vs
			continue
		}
		next := jsonscan.SkipSpace(doc, ve)
		if next >= len(doc) {
			return -1, -1, errNotObject
		}
		switch {
		case doc[next] == ',':
			return sep + 1, next + 1, nil // the separator after it goes
		case doc[sep] == ',':
			return sep, ve, nil // the last one: the separator before it goes
		default:
			return sep + 1, ve, nil // the only one
		}
	}
}

// member finds the member named key of the object at doc[at]: sep is
// the '{' or ',' before it, [vs, ve) its value.
func member(doc []byte, at int, key string) (sep, vs, ve int, ok bool, err error) {
	sep = at
	i := jsonscan.SkipSpace(doc, at+1)
	if i < len(doc) && doc[i] == '}' {
		return 0, 0, 0, false, nil
	}
	for {
		if i >= len(doc) || doc[i] != '"' {
			return 0, 0, 0, false, errNotObject
		}
		ks := i
		if i, err = skipValue(doc, i); err != nil {
			return 0, 0, 0, false, err
		}
		match, err := keyIs(doc[ks:i], key)
		if err != nil {
			return 0, 0, 0, false, err
		}
		i = jsonscan.SkipSpace(doc, i)
		if i >= len(doc) || doc[i] != ':' {
			return 0, 0, 0, false, errNotObject
		}
		vs = jsonscan.SkipSpace(doc, i+1)
		if ve, err = skipValue(doc, vs); err != nil {
			return 0, 0, 0, false, err
		}
		if match {
			return sep, vs, ve, true, nil
		}
		var more bool
		if sep, i, more, err = nextItem(doc, ve, '}'); !more {
			return 0, 0, 0, false, err
		}
	}
}

// nextItem moves past the value of an object or array ending at ve: more
// is false at the closing byte close (err nil) or at anything that is
// neither it nor ',' (errNotObject); else sep is the ',' and i the next
// item's start.
func nextItem(doc []byte, ve int, close byte) (sep, i int, more bool, err error) {
	i = jsonscan.SkipSpace(doc, ve)
	switch {
	case i >= len(doc):
		return 0, 0, false, errNotObject
	case doc[i] == close:
		return 0, 0, false, nil
	case doc[i] == ',':
		return i, jsonscan.SkipSpace(doc, i+1), true, nil
	}
	return 0, 0, false, errNotObject
}

// element finds the element t (an array index) of the array at doc[at]:
// sep is the '[' or ',' before it, [vs, ve) the element.
func element(doc []byte, at int, t string) (sep, vs, ve int, ok bool, err error) {
	n, ok := index(t)
	if !ok {
		return 0, 0, 0, false, nil
	}
	sep = at
	i := jsonscan.SkipSpace(doc, at+1)
	if i < len(doc) && doc[i] == ']' {
		return 0, 0, 0, false, nil
	}
	for k := 0; ; k++ {
		vs = i
		if ve, err = skipValue(doc, vs); err != nil {
			return 0, 0, 0, false, err
		}
		if k == n {
			return sep, vs, ve, true, nil
		}
		var more bool
		if sep, i, more, err = nextItem(doc, ve, ']'); !more {
			return 0, 0, 0, false, err
		}
	}
}

// keyIs reports whether the quoted JSON string raw is key.
func keyIs(raw []byte, key string) (bool, error) {
	match, ok := jsonscan.KeyIs(raw, key)
	if !ok {
		return false, errNotObject
	}
	return match, nil
}

// skipValue returns the index just past the JSON value at doc[i].
func skipValue(doc []byte, i int) (int, error) {
	end, ok := jsonscan.SkipValue(doc, i)
	if !ok {
		return 0, errNotObject
	}
	return end, nil
}

// index is the array index t, when it is one: digits without a leading
// zero.
func index(t string) (int, bool) {
	if t == "" || len(t) > 9 || len(t) > 1 && t[0] == '0' {
		return 0, false
	}
	i := 0
	for _, c := range []byte(t) {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int(c-'0')
	}
	return i, true
}
