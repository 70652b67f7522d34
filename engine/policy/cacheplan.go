package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// timeDependent lists builtins whose result depends on the clock although
// OPA does not mark them nondeterministic: certificate chains are verified
// at the current time unless the caller passes one.
var timeDependent = map[string]bool{
	"crypto.x509.parse_and_verify_certificates":              true,
	"crypto.x509.parse_and_verify_certificates_with_options": true,
}

// cachePlan says whether decisions of a set can be cached and, if so,
// which parts of the input they depend on.
type cachePlan struct {
	// paths are the key paths below input, as the keys to look up one
	// after another; an empty path is the whole input. No path is a
	// prefix of another.
	paths [][]*ast.Term
	// disabled says why decisions cannot be cached; empty when they can.
	disabled string
}

// planCache walks every compiled module and finds the parts of input the
// policy can read. The result of an evaluation is a function of the values
// at those paths only when the policy calls no builtin that depends on
// something else (the clock, the network, randomness) and replaces nothing
// with `with`; otherwise caching is disabled.
//
// A reference input.a.b[x].c reads at most the value at input.a.b: the
// longest prefix of constant string keys. The bare input (passed to a
// function, assigned, iterated with a variable key) is the empty path.
func planCache(modules map[string]*ast.Module) cachePlan {
	p := planner{}
	for _, name := range slices.Sorted(maps.Keys(modules)) {
		m := modules[name]
		ast.WalkExprs(m, p.expr)
		p.terms(m)
		if p.disabled != "" {
			return cachePlan{disabled: p.disabled}
		}
	}
	return cachePlan{paths: minimalPaths(p.paths)}
}

// reads reports whether the value at the key path keys (below input) can
// be observed by the policy: some key path of the plan runs through it, or
// ends at it or above it. A disabled plan reads everything.
func (p cachePlan) reads(keys ...*ast.Term) bool {
	if p.disabled != "" {
		return true
	}
	for _, path := range p.paths {
		if hasPrefix(path, keys) || hasPrefix(keys, path) {
			return true
		}
	}
	return false
}

type planner struct {
	paths    [][]*ast.Term
	disabled string
}

func (p *planner) disable(loc *ast.Location, format string, args ...any) {
	if p.disabled != "" {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if loc != nil && loc.File != "" {
		msg = fmt.Sprintf("%s:%d: %s", loc.File, loc.Row, msg)
	}
	p.disabled = msg
}

func (p *planner) expr(e *ast.Expr) bool {
	if len(e.With) > 0 {
		p.disable(e.Location, "uses with, which can replace input or a function")
	}
	if e.IsCall() {
		p.call(e.Operator(), e.Location)
	}
	return false
}

// call disables caching when op names a builtin whose result does not
// follow from its arguments.
func (p *planner) call(op ast.Ref, loc *ast.Location) {
	name := op.String()
	if b, ok := ast.BuiltinMap[name]; (ok && b.IsNondeterministic()) || timeDependent[name] {
		p.disable(loc, "calls %s, whose result is not a function of its arguments", name)
	}
}

// terms records every reference to input in x, including references
// nested in the keys of other references and in calls.
func (p *planner) terms(x any) {
	ast.WalkTerms(x, func(t *ast.Term) bool {
		switch v := t.Value.(type) {
		case ast.Ref:
			if v.HasPrefix(ast.InputRootRef) {
				p.input(v)
				// The head is the input variable itself: walk only the
				// keys, which may hold references of their own.
				for _, k := range v[1:] {
					p.terms(k)
				}
				return true
			}
		case ast.Call:
			if op, ok := v[0].Value.(ast.Ref); ok {
				p.call(op, t.Location)
			}
		case ast.Var:
			// The compiler resolves input to a reference; a bare
			// variable of that name would still read all of it.
			if v.Equal(ast.InputRootDocument.Value) {
				p.paths = append(p.paths, nil)
			}
		}
		return false
	})
}

// input records the constant prefix of a reference to input.
func (p *planner) input(ref ast.Ref) {
	n := 1
	for n < len(ref) {
		if _, ok := ref[n].Value.(ast.String); !ok {
			break
		}
		n++
	}
	path := make([]*ast.Term, n-1)
	copy(path, ref[1:n])
	p.paths = append(p.paths, path)
}

// minimalPaths sorts the paths and drops every path that repeats or
// extends another: the value at the shorter path covers it.
func minimalPaths(paths [][]*ast.Term) [][]*ast.Term {
	slices.SortFunc(paths, func(a, b []*ast.Term) int {
		if c := len(a) - len(b); c != 0 {
			return c
		}
		return slices.CompareFunc(a, b, func(x, y *ast.Term) int { return x.Value.Compare(y.Value) })
	})
	var out [][]*ast.Term
	for _, path := range paths {
		if !slices.ContainsFunc(out, func(kept []*ast.Term) bool { return hasPrefix(path, kept) }) {
			out = append(out, path)
		}
	}
	slices.SortFunc(out, func(a, b []*ast.Term) int { return strings.Compare(pathString(a), pathString(b)) })
	return out
}

func hasPrefix(path, prefix []*ast.Term) bool {
	if len(prefix) > len(path) {
		return false
	}
	for i, k := range prefix {
		if !k.Equal(path[i]) {
			return false
		}
	}
	return true
}

// pathString writes a key path as the reference it stands for, such as
// input.user.roles or input.request.headers["x-tenant"].
func pathString(path []*ast.Term) string {
	return append(ast.Ref{ast.InputRootDocument}, path...).String()
}
