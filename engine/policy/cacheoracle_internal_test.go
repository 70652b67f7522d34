package policy

import (
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The decision cache compares keys by their encodings (keyEnc); these
// compare them by their values, as a policy sees them, for tests to hold
// the encoding to.

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

// samePart is sameValue on the values of two parts, whatever their kinds.
func samePart(a, b *keyPart) bool {
	if a.kind == partValue && b.kind == partValue {
		return sameValue(a.v, b.v)
	}
	if a.kind == partValue {
		a, b = b, a
	}
	switch a.kind {
	case partString:
		switch b.kind {
		case partString:
			return a.s == b.s
		case partValue:
			y, ok := b.v.(ast.String)
			return ok && string(y) == a.s
		}
	case partStrings:
		switch b.kind {
		case partStrings:
			return slices.Equal(a.ss, b.ss)
		case partValue:
			y, ok := b.v.(*ast.Array)
			if !ok || y.Len() != len(a.ss) {
				return false
			}
			for i, s := range a.ss {
				e, ok := y.Elem(i).Value.(ast.String)
				if !ok || string(e) != s {
					return false
				}
			}
			return true
		}
	}
	return false
}
