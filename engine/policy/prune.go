package policy

import "github.com/open-policy-agent/opa/v1/ast"

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
