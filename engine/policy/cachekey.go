package policy

import (
	"strings"

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

// keyHasher hashes key parts and measures them. The hash only picks the
// candidate entry; a hit is confirmed with sameValue, so collisions cost
// an evaluation and never a wrong decision.
type keyHasher struct {
	h    bufHash
	size int
}

func (kh *keyHasher) part(p *keyPart) {
	if p.depth == undefinedDepth {
		kh.h.writeByte(tagUndefined)
		kh.size++
		return
	}
	kh.length(tagDepth, p.depth)
	switch p.kind {
	case partString:
		kh.str(p.s)
	case partStrings:
		// As value hashes the array of strings.
		kh.size += 16
		kh.length(tagArray, len(p.ss))
		for _, s := range p.ss {
			kh.str(s)
		}
	default:
		kh.value(p.v)
	}
}

// str hashes s as value hashes ast.String(s).
func (kh *keyHasher) str(s string) {
	kh.size += 16
	kh.length(tagString, len(s))
	kh.h.writeString(s)
	kh.size += len(s)
}

func (kh *keyHasher) length(tag byte, n int) {
	kh.h.writeTagged(tag, uint64(n))
}

// value hashes v in a canonical order (objects and sets iterate sorted)
// and adds its approximate memory footprint to size.
func (kh *keyHasher) value(v ast.Value) {
	if x, ok := v.(ast.String); ok {
		kh.str(string(x))
		return
	}
	kh.size += 16
	switch x := v.(type) {
	case ast.Null:
		kh.h.writeByte(tagNull)
	case ast.Boolean:
		if x {
			kh.h.writeByte(tagTrue)
		} else {
			kh.h.writeByte(tagFalse)
		}
	case ast.Number:
		// Numbers hash by their text: 1 and 1.0 are equal in Rego yet
		// print differently, so they must be different keys.
		kh.length(tagNumber, len(x))
		kh.h.writeString(string(x))
		kh.size += len(x)
	// Loops rather than Foreach: a closure would move kh, and with it
	// every key's hasher, to the heap.
	case *ast.Array:
		kh.length(tagArray, x.Len())
		for i := range x.Len() {
			kh.value(x.Elem(i).Value)
		}
	case ast.Object:
		kh.length(tagObject, x.Len())
		for it := x.KeysIterator(); ; {
			k, ok := it.Next()
			if !ok {
				break
			}
			kh.value(k.Value)
			kh.value(x.Get(k).Value)
		}
	case ast.Set:
		kh.length(tagSet, x.Len())
		for _, t := range x.Slice() {
			kh.value(t.Value)
		}
	default:
		// Input values hold none of the other kinds; sameValue still
		// confirms them with ast.Compare.
		kh.length(tagOther, v.Hash())
	}
}

// sameParts reports whether two keys are identical.
func sameParts(a, b []keyPart) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].depth != b[i].depth {
			return false
		}
		if a[i].depth != undefinedDepth && !samePart(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

// sameValue is value equality that a policy cannot see through: like
// ast.Compare, but numbers must also be written alike.
func sameValue(a, b ast.Value) bool {
	switch x := a.(type) {
	case ast.String:
		y, ok := b.(ast.String)
		return ok && x == y
	case ast.Number:
		y, ok := b.(ast.Number)
		return ok && x == y
	case ast.Boolean:
		y, ok := b.(ast.Boolean)
		return ok && x == y
	case ast.Null:
		_, ok := b.(ast.Null)
		return ok
	case *ast.Array:
		y, ok := b.(*ast.Array)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for i := range x.Len() {
			if !sameValue(x.Elem(i).Value, y.Elem(i).Value) {
				return false
			}
		}
		return true
	case ast.Object:
		y, ok := b.(ast.Object)
		if !ok || x.Len() != y.Len() {
			return false
		}
		// Keys iterate in sorted order, so equal objects line up pair by
		// pair; comparing the texts of numeric keys needs that order.
		xk, yk := x.Keys(), y.Keys()
		for i := range xk {
			if !sameValue(xk[i].Value, yk[i].Value) || !sameValue(x.Get(xk[i]).Value, y.Get(yk[i]).Value) {
				return false
			}
		}
		return true
	case ast.Set:
		y, ok := b.(ast.Set)
		if !ok || x.Len() != y.Len() {
			return false
		}
		xs, ys := x.Sorted(), y.Sorted()
		for i := range xs.Len() {
			if !sameValue(xs.Elem(i).Value, ys.Elem(i).Value) {
				return false
			}
		}
		return true
	default:
		return ast.Compare(a, b) == 0
	}
}

// detach copies a key so that a cache entry holds only what it needs: not
// the block of terms the whole input was built in, nor the memory of the
// request its strings may share (see envoy.UnmarshalCheckRequest).
func detach(parts []keyPart) []keyPart {
	out := make([]keyPart, len(parts))
	for i, p := range parts {
		out[i] = keyPart{depth: p.depth, kind: p.kind}
		switch p.kind {
		case partString:
			out[i].s = strings.Clone(p.s)
		case partStrings:
			out[i].ss = make([]string, len(p.ss))
			for j, s := range p.ss {
				out[i].ss[j] = strings.Clone(s)
			}
		default:
			out[i].v = ownValue(p.v)
		}
	}
	return out
}

// ownValue is a copy of v whose strings are copies too.
func ownValue(v ast.Value) ast.Value {
	switch x := v.(type) {
	case nil:
		return nil
	case ast.String:
		return ast.String(strings.Clone(string(x)))
	case *ast.Array, ast.Object, ast.Set:
		c := ast.CopyValue(v)
		ast.WalkTerms(c, func(t *ast.Term) bool {
			if s, ok := t.Value.(ast.String); ok {
				t.Value = ast.String(strings.Clone(string(s)))
			}
			return false
		})
		return c
	}
	return v
}
