package policy

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// TestRuleCacheMatchesTopdown runs random sequences of operations on a
// ruleCache, reset and reused as evaluations reuse it, and on
// topdown's own virtual cache, and checks that every lookup and key list
// agrees. References share prefixes, differ in number forms, reuse the
// slice Put was given (as topdown does), and collide in length.
func TestRuleCacheMatchesTopdown(t *testing.T) {
	terms := []*ast.Term{
		ast.DefaultRootDocument, ast.StringTerm("svc"), ast.StringTerm("authz"), ast.StringTerm("allow"),
		ast.StringTerm("roles"), ast.NumberTerm("1"), ast.NumberTerm("1.0"), ast.IntNumberTerm(2),
		ast.ArrayTerm(ast.StringTerm("a")), ast.BooleanTerm(true), ast.NullTerm(),
	}
	values := []*ast.Term{nil, ast.BooleanTerm(false), ast.StringTerm("v"), ast.ArrayTerm(ast.IntNumberTerm(1))}
	rng := rand.New(rand.NewPCG(3, 4))
	got := newRuleCache()
	for round := range 200 {
		if !got.reset() {
			t.Fatal("a cache of at most 300 entries is not kept")
		}
		want := topdown.NewVirtualCache()
		depth := 0
		buf := make(ast.Ref, 0, 6)
		randRef := func() ast.Ref {
			buf = buf[:0]
			for range 1 + rng.IntN(5) {
				buf = append(buf, terms[rng.IntN(len(terms))])
			}
			return buf
		}
		for op := range 300 {
			switch n := rng.IntN(20); {
			case n < 8:
				ref, v := randRef(), values[rng.IntN(len(values))]
				got.Put(ref, v)
				want.Put(ref, v)
			case n < 17:
				ref := randRef()
				gv, gu := got.Get(ref)
				wv, wu := want.Get(ref)
				if !gv.Equal(wv) || gu != wu {
					t.Fatalf("round %d op %d: Get(%v) = %v, %v; topdown %v, %v", round, op, ref, gv, gu, wv, wu)
				}
			case n < 18:
				got.Push()
				want.Push()
				depth++
			case n < 19:
				if depth > 0 {
					got.Pop()
					want.Pop()
					depth--
				}
			default:
				if g, w := got.Keys(), want.Keys(); !sameRefs(g, w) {
					t.Fatalf("round %d op %d: Keys = %v, topdown %v", round, op, g, w)
				}
			}
		}
	}
}

// sameRefs reports whether a and b hold equal references, in any order.
// Equal references may print differently (1 and 1.0): topdown's cache
// keeps the key terms of the first reference through each prefix.
func sameRefs(a, b []ast.Ref) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
	for _, r := range a {
		i := slices.IndexFunc(b, func(o ast.Ref) bool { return o.Equal(r) })
		for i >= 0 && used[i] {
			j := slices.IndexFunc(b[i+1:], func(o ast.Ref) bool { return o.Equal(r) })
			if j < 0 {
				i = -1
			} else {
				i += 1 + j
			}
		}
		if i < 0 {
			return false
		}
		used[i] = true
	}
	return true
}

// TestRuleCacheReuse checks that a cache handed out again holds nothing
// of the evaluation before, and that an oversized one is not kept.
func TestRuleCacheReuse(t *testing.T) {
	var states evalStates
	st := states.get(true)
	c := &st.rules
	ref := ast.MustParseRef("data.svc.authz.allow")
	c.Put(ref, ast.BooleanTerm(true))
	c.Push()
	c.Put(ref, ast.BooleanTerm(false))
	states.put(st)
	for range 10 {
		st := states.get(true)
		c := &st.rules
		if v, undefined := c.Get(ref); v != nil || undefined {
			t.Fatalf("reused cache holds %v (undefined %v)", v, undefined)
		}
		if c.top != 0 {
			t.Fatalf("reused cache starts in frame %d", c.top)
		}
		states.put(st)
	}
	big := newRuleCache()
	for i := range maxPooledEntries + 1 {
		big.Put(ast.Ref{ast.IntNumberTerm(i)}, ast.BooleanTerm(true))
	}
	if big.reset() || len(big.frames[0].entries) != maxPooledEntries+1 {
		t.Fatal("an oversized cache was reset for reuse")
	}
}
