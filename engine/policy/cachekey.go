package policy

import (
	"encoding/binary"

	"github.com/open-policy-agent/opa/v1/ast"
)

// keyPart is the value an input holds at one key path, as much of it as
// the policy can observe.
//
//   - depth == len(path): the value is the value at the path.
//   - 0 <= depth < len(path): the value at path[:depth] is not an object
//     (a string, an array, a set…); the value is that whole value, which
//     decides every lookup below it.
//   - depth == undefinedDepth: some object on the way lacks the key, so
//     every reference through the path is undefined. This is distinct from
//     a null or an empty string at the path.
//
// The value is v, or for a part read straight from a string field of the
// typed input (kind partString) the string s, and for input.user.roles
// (kind partStrings) the array of the strings ss: a cache hit then builds
// no AST value at all. materialize sets v for those too.
type keyPart struct {
	depth int
	v     ast.Value
	kind  uint8
	s     string
	ss    []string
}

// Kinds of keyPart values.
const (
	partValue   uint8 = iota // v
	partString               // s: ast.String(s)
	partStrings              // ss: an array of ast.String
)

const undefinedDepth = -1

// partAt looks path up in input the way a reference with those constant
// keys would.
func partAt(input ast.Value, path []*ast.Term) keyPart {
	v := input
	for i, k := range path {
		obj, ok := v.(ast.Object)
		if !ok {
			return keyPart{depth: i, v: v}
		}
		t := obj.Get(k)
		if t == nil {
			return keyPart{depth: undefinedDepth}
		}
		v = t.Value
	}
	return keyPart{depth: len(path), v: v}
}

// typedPart is partAt(in.Value(), path) for a non-empty path, built from
// the typed input without the rest of the document: only the value under
// the path's first two keys (or its one key) is converted, by the code
// Value uses. It fails only when the claims cannot be converted, which
// Value reports too.
//
// claims is the converted Claims, or nil when not converted yet.
func typedPart(in *Input, path []*ast.Term, b *termBuf, claims ast.Value) (keyPart, error) {
	return typedPartOf(in, path, leafOf(path), b, claims)
}

// typedPartOf is typedPart for a path whose leaf field is leaf (leafOf).
func typedPartOf(in *Input, path []*ast.Term, leaf leafField, b *termBuf, claims ast.Value) (keyPart, error) {
	var p keyPart
	err := typedPartInto(in, path, leaf, b, claims, &p)
	return p, err
}

// typedPartInto is typedPartOf writing the part to out, which it sets
// wholly unless it fails.
func typedPartInto(in *Input, path []*ast.Term, leaf leafField, b *termBuf, claims ast.Value, out *keyPart) error {
	if leafValue(in, leaf, out) {
		return nil
	}
	var (
		t     *ast.Term
		depth = 1
	)
	switch path[0].Value {
	case keyAction.Value:
		t = b.str(in.Action)
	case keyUser.Value:
		if claims == nil && (len(path) == 1 || path[1].Value == keyClaims.Value) {
			var err error
			if claims, err = claimsValue(in.User.Claims); err != nil {
				return err
			}
		}
		if len(path) == 1 {
			t = b.term(in.User.value(b, claims))
		} else {
			t, depth = in.User.field(b, path[1], claims), 2
		}
	case keyResource.Value:
		if len(path) == 1 {
			t = b.term(in.Resource.value(b))
		} else {
			t, depth = in.Resource.field(b, path[1]), 2
		}
	case keyTenant.Value:
		if len(path) == 1 {
			t = b.term(in.Tenant.value(b))
		} else {
			t, depth = in.Tenant.field(b, path[1]), 2
		}
	case keyRequest.Value:
		switch {
		case in.Request == nil:
		case len(path) == 1:
			t = b.term(in.Request.value(b))
		default:
			t, depth = in.Request.field(b, path[1]), 2
		}
	case keyIdentity.Value:
		if in.Identity == nil {
			break
		}
		var idClaims ast.Value
		if len(path) == 1 || path[1].Value == keyClaims.Value {
			var err error
			if idClaims, err = in.identityClaims(claims); err != nil {
				return err
			}
		}
		if len(path) == 1 {
			t = b.term(in.Identity.value(b, idClaims))
		} else {
			t, depth = in.Identity.field(b, path[1], idClaims), 2
		}
	}
	if t == nil {
		*out = keyPart{depth: undefinedDepth}
		return nil
	}
	*out = partAt(t.Value, path[depth:])
	if out.depth != undefinedDepth {
		out.depth += depth
	}
	return nil
}

// convertible reports whether ast.InterfaceToValue surely converts x: it
// holds only kinds of values that conversion cannot fail on. False means
// "not sure": the caller converts to find out.
func convertible(x any) bool {
	switch x := x.(type) {
	case nil, bool, string, float64, int, int64, uint64, []string, map[string]string:
		return true
	case []any:
		for _, e := range x {
			if !convertible(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range x {
			if !convertible(e) {
				return false
			}
		}
		return true
	}
	return false
}

// Kinds of values as the hash tells them apart.
const (
	tagUndefined byte = iota
	tagDepth
	tagNull
	tagFalse
	tagTrue
	tagNumber
	tagString
	tagArray
	tagObject
	tagSet
	tagOther
)

// keyEnc writes key parts in a canonical, self-delimiting byte encoding:
// a tag per value, lengths as uvarints, objects by sorted keys, sets
// sorted. Two keys are the same key exactly when their encodings are
// equal, so a cached decision is found by comparing bytes, and an entry
// keeps its key as one string. A value of a kind that JSON input cannot
// hold is not encoded faithfully; opaque is then set, and the key is not
// cached.
//
// The encoding is written into buf, and only a key longer than buf moves
// to big, on the heap: a keyEnc the caller declares stays on its stack.
type keyEnc struct {
	n      int
	buf    [256]byte
	big    []byte
	opaque bool
}

// bytes returns the encoding written so far.
func (ke *keyEnc) bytes() []byte {
	if ke.big != nil {
		return ke.big
	}
	return ke.buf[:ke.n]
}

// reset empties the encoding.
func (ke *keyEnc) reset() {
	ke.n, ke.big, ke.opaque = 0, nil, false
}

func (ke *keyEnc) writeByte(c byte) {
	if ke.big == nil && ke.n < len(ke.buf) {
		ke.buf[ke.n] = c
		ke.n++
		return
	}
	ke.spill(1)
	ke.big = append(ke.big, c)
}

func (ke *keyEnc) writeString(s string) {
	if ke.big == nil && len(s) <= len(ke.buf)-ke.n {
		ke.n += copy(ke.buf[ke.n:], s)
		return
	}
	ke.spill(len(s))
	ke.big = append(ke.big, s...)
}

// spill moves the encoding to big, with room for n more bytes.
func (ke *keyEnc) spill(n int) {
	if ke.big == nil {
		ke.big = append(make([]byte, 0, 2*(ke.n+n)), ke.buf[:ke.n]...)
	}
}

func (ke *keyEnc) part(p *keyPart) {
	if p.depth == undefinedDepth {
		ke.writeByte(tagUndefined)
		return
	}
	ke.length(tagDepth, p.depth)
	switch p.kind {
	case partString:
		ke.str(p.s)
	case partStrings:
		// As value writes the array of strings.
		ke.length(tagArray, len(p.ss))
		for _, s := range p.ss {
			ke.str(s)
		}
	default:
		ke.value(p.v)
	}
}

// str writes s as value writes ast.String(s).
func (ke *keyEnc) str(s string) {
	ke.length(tagString, len(s))
	ke.writeString(s)
}

func (ke *keyEnc) length(tag byte, n int) {
	var b [1 + binary.MaxVarintLen64]byte
	b[0] = tag
	m := 1 + binary.PutUvarint(b[1:], uint64(n))
	if ke.big == nil && m <= len(ke.buf)-ke.n {
		ke.n += copy(ke.buf[ke.n:], b[:m])
		return
	}
	ke.spill(m)
	ke.big = append(ke.big, b[:m]...)
}

// value writes v in a canonical order: objects and sets iterate sorted.
func (ke *keyEnc) value(v ast.Value) {
	switch x := v.(type) {
	case ast.String:
		ke.str(string(x))
	case ast.Null:
		ke.writeByte(tagNull)
	case ast.Boolean:
		if x {
			ke.writeByte(tagTrue)
		} else {
			ke.writeByte(tagFalse)
		}
	case ast.Number:
		// Numbers are keyed by their text: 1 and 1.0 are equal in Rego
		// yet print differently, so they must be different keys.
		ke.length(tagNumber, len(x))
		ke.writeString(string(x))
	// Loops rather than Foreach: a closure would move ke, and with it
	// every key's buffer, to the heap.
	case *ast.Array:
		ke.length(tagArray, x.Len())
		for i := range x.Len() {
			ke.value(x.Elem(i).Value)
		}
	case ast.Object:
		// Keys iterate in sorted order.
		ke.length(tagObject, x.Len())
		for it := x.KeysIterator(); ; {
			k, ok := it.Next()
			if !ok {
				break
			}
			ke.value(k.Value)
			ke.value(x.Get(k).Value)
		}
	case ast.Set:
		s := x.Sorted()
		ke.length(tagSet, s.Len())
		for i := range s.Len() {
			ke.value(s.Elem(i).Value)
		}
	default:
		// Input values hold none of the other kinds.
		ke.writeByte(tagOther)
		ke.opaque = true
	}
}
