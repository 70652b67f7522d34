package policy

import "github.com/open-policy-agent/opa/v1/ast"

// A set that caches decisions knows every part of the input its policy
// can read (planCache): the values at its key paths. Evaluation is given
// an input document holding only those parts, which the policy cannot
// tell from the whole document, and which costs a fraction of it to build
// and to look things up in: a request's headers, query, path and claims
// are left out unless some rule reads them.

// input returns the input document the policy is evaluated on for a typed
// input: only the parts at the cache's key paths when the set caches,
// else the whole document.
func (s *Set) input(in *Input) (ast.Value, error) {
	if c := s.cache; c != nil {
		var parts [8]keyPart
		k, whole, err := c.key(in, parts[:0])
		if err == nil {
			if whole != nil {
				return whole, nil
			}
			return c.document(k.parts), nil
		}
		// Value reports the input that cannot be converted.
	}
	return in.Value()
}

// document builds the smallest input document that holds parts, the key
// parts of some input: each defined part's value at its path (or at the
// prefix of its path where the input holds something other than an
// object), inside objects that hold nothing else. A reference through any
// key path finds in it what it finds in the whole input.
func (c *decisionCache) document(parts []keyPart) ast.Value {
	root := ast.NewObject()
	for i, p := range parts {
		switch {
		case p.depth == undefinedDepth:
			continue
		case p.depth == 0:
			// The input itself is not an object: it is all there is.
			return p.v
		}
		path := c.paths[i][:p.depth]
		obj := root
		for _, k := range path[:len(path)-1] {
			t := obj.Get(k)
			if t == nil {
				t = ast.NewTerm(ast.NewObject())
				obj.Insert(k, t)
			}
			next, ok := t.Value.(ast.Object)
			if !ok {
				// Another part put a value that is not an object here: it
				// is the whole of what the input holds below.
				break
			}
			obj = next
		}
		if obj.Get(path[len(path)-1]) == nil {
			obj.Insert(path[len(path)-1], ast.NewTerm(p.v))
		}
	}
	return root
}
