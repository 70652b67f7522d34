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
// else the whole document. It is the document decisionCache.document
// builds from the input's key parts, built without hashing the parts and
// with each object made in one piece. d is the builder's scratch, which
// an evaluation state keeps between evaluations (see evalState).
func (s *Set) input(in *Input, d *docBuilder) (ast.Value, error) {
	c := s.cache
	if c == nil {
		return in.Value()
	}
	// Value fails exactly when the claims cannot be converted; so must
	// this document, whether or not the policy reads the claims.
	claims, err := in.checkClaims()
	if err != nil {
		return in.Value()
	}
	if n := 2*len(c.paths) + len(in.User.Roles); cap(d.terms) < n {
		d.terms = make([]ast.Term, 0, n)
	}
	d.b = termBuf{terms: d.terms[:0]}
	d.nodes = append(d.nodes[:0], docNode{first: noNode, last: noNode, next: noNode})
	for i, path := range c.paths {
		if len(path) == 0 {
			// The whole input is a key part: the document is the input.
			return in.Value()
		}
		if claims == nil && (path[0].Value == keyUser.Value || path[0].Value == keyIdentity.Value) && (len(path) == 1 || path[1].Value == keyClaims.Value) {
			var err error
			if claims, err = claimsValue(in.User.Claims); err != nil {
				return in.Value()
			}
		}
		p, err := typedPartOf(in, path, c.leaves[i], &d.b, claims)
		if err != nil {
			return in.Value()
		}
		if p.depth != undefinedDepth {
			// A string part carries its Go string; the document needs
			// the value.
			d.materialize(&p)
			d.add(path[:p.depth], p.v)
		}
	}
	return d.object(0), nil
}

// noNode ends a list of docNodes.
const noNode = -1

// docNode is an object of the document being built (value nil) or a value
// of the input placed at key in its parent.
type docNode struct {
	key         *ast.Term
	value       ast.Value
	first, last int // children, noNode when none
	next        int // next sibling
	n           int // number of children
}

// docBuilder builds the document of some key parts as a tree of nodes,
// then turns each object node into an ast.Object with all its keys at
// once: inserting keys one by one into objects costs several times the
// allocations. Its nodes are scratch that outlives the evaluation in the
// pooled evalState: on the stack they would move to the heap, a kilobyte
// per evaluation, since the keys they hold end up in the document.
//
// The document's terms come from terms, which the state keeps as well:
// nothing refers to the document once its evaluation has returned (the
// result holds Go values, the rule cache is emptied), so the next
// evaluation may write its own terms there.
type docBuilder struct {
	b     termBuf
	nodes []docNode
	terms []ast.Term
	// strs are the strings of the document's string parts with their
	// values, so that equal strings share one value: an allowed request
	// names its tenant three times and its role twice.
	strs []docString
}

type docString struct {
	s string
	v ast.Value
}

// maxDocStrings bounds the strings a builder looks through for an equal
// one.
const maxDocStrings = 8

// materialize is p.materialize with the strings' values shared within
// the document and the roles' terms taken from the builder's terms.
func (d *docBuilder) materialize(p *keyPart) {
	switch p.kind {
	case partString:
		p.v = d.str(p.s)
	case partStrings:
		terms := make([]*ast.Term, len(p.ss))
		for i, s := range p.ss {
			terms[i] = d.b.term(d.str(s))
		}
		p.v = ast.NewArray(terms...)
	}
}

func (d *docBuilder) str(s string) ast.Value {
	for _, x := range d.strs {
		if x.s == s {
			return x.v
		}
	}
	v := ast.Value(ast.String(s))
	if len(d.strs) < maxDocStrings {
		d.strs = append(d.strs, docString{s: s, v: v})
	}
	return v
}

// docNodes is the room a builder starts with: enough for the documents of
// most policies.
const docNodes = 16

// maxPooledDocNodes bounds the nodes, and the terms, a builder keeps
// between evaluations.
const maxPooledDocNodes = 256

// reset drops what the builder refers to, so that a pooled state keeps
// no input alive, and reports whether its room is worth keeping.
func (d *docBuilder) reset() bool {
	clear(d.nodes)
	d.nodes = d.nodes[:0]
	clear(d.terms[:cap(d.terms)])
	clear(d.strs)
	d.strs = d.strs[:0]
	d.b = termBuf{}
	return cap(d.nodes) <= maxPooledDocNodes && cap(d.terms) <= maxPooledDocNodes
}

// add places v at path, creating the objects on the way, as
// decisionCache.document does: the first value placed at a path stays,
// and nothing is placed below a value of the input.
func (d *docBuilder) add(path []*ast.Term, v ast.Value) {
	at := 0
	for i, k := range path {
		child := d.child(at, k)
		if child == noNode {
			var leaf ast.Value
			if i == len(path)-1 {
				leaf = v
			}
			child = d.append(at, k, leaf)
		} else if d.nodes[child].value != nil || i == len(path)-1 {
			return
		}
		at = child
	}
}

func (d *docBuilder) child(parent int, k *ast.Term) int {
	for c := d.nodes[parent].first; c != noNode; c = d.nodes[c].next {
		if d.nodes[c].key.Equal(k) {
			return c
		}
	}
	return noNode
}

func (d *docBuilder) append(parent int, k *ast.Term, v ast.Value) int {
	i := len(d.nodes)
	d.nodes = append(d.nodes, docNode{key: k, value: v, first: noNode, last: noNode, next: noNode})
	p := &d.nodes[parent]
	if p.first == noNode {
		p.first = i
	} else {
		d.nodes[p.last].next = i
	}
	p.last = i
	p.n++
	return i
}

// object is the ast.Object of an object node.
func (d *docBuilder) object(at int) ast.Value {
	var buf [8][2]*ast.Term
	items := buf[:0]
	if n := d.nodes[at].n; n > len(buf) {
		items = make([][2]*ast.Term, 0, n)
	}
	for c := d.nodes[at].first; c != noNode; c = d.nodes[c].next {
		v := d.nodes[c].value
		if v == nil {
			v = d.object(c)
		}
		items = append(items, [2]*ast.Term{d.nodes[c].key, d.b.term(v)})
	}
	return ast.NewObject(items...)
}
