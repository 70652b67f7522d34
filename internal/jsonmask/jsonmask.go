// Package jsonmask erases the values that JSON pointers (RFC 6901) name
// from a JSON object, as OPA's decision log masks remove them: a member
// is deleted from its object, an element is cut out of its array (the
// elements after it move up one place), a pointer that names nothing is
// skipped, and the pointers that did erase something are listed, in the
// order given, in the object's "erased" member.
package jsonmask

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
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
// erases something it returns a new encoding of the object, its members
// in sorted order, with "erased" listing the pointers that did; when
// nothing is erased it returns doc itself and false. Numbers keep their
// text. The error is doc not being a JSON object.
func (m *Mask) Apply(doc []byte) ([]byte, bool, error) {
	if m.Empty() {
		return doc, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil || root == nil {
		return nil, false, fmt.Errorf("jsonmask: not a JSON object: %v", err)
	}
	var erased []string
	for _, p := range m.ptrs {
		if _, ok := remove(root, p.tokens); ok {
			erased = append(erased, p.raw)
		}
	}
	if len(erased) == 0 {
		return doc, false, nil
	}
	root[Erased] = erased
	var buf bytes.Buffer
	buf.Grow(len(doc) + 64)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(root); err != nil {
		return nil, false, fmt.Errorf("jsonmask: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), true, nil
}

// remove erases what tokens name under node and returns node as it is
// then (a new slice when an array element was cut out) and whether
// something was erased.
func remove(node any, tokens []string) (any, bool) {
	t, rest := tokens[0], tokens[1:]
	switch v := node.(type) {
	case map[string]any:
		child, ok := v[t]
		if !ok {
			return node, false
		}
		if len(rest) == 0 {
			delete(v, t)
			return v, true
		}
		c, ok := remove(child, rest)
		v[t] = c
		return v, ok
	case []any:
		i, ok := index(t, len(v))
		if !ok {
			return node, false
		}
		if len(rest) == 0 {
			return append(v[:i:i], v[i+1:]...), true
		}
		c, ok := remove(v[i], rest)
		v[i] = c
		return v, ok
	}
	return node, false
}

// index is the array index t, when it is one (digits without a leading
// zero) below n.
func index(t string, n int) (int, bool) {
	if t == "" || len(t) > 1 && t[0] == '0' {
		return 0, false
	}
	i := 0
	for _, c := range []byte(t) {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int(c-'0')
		if i >= n {
			return 0, false
		}
	}
	return i, true
}
