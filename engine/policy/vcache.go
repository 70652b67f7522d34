package policy

import (
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// ruleCache is the topdown.VirtualCache of one evaluation: the values of
// the rules and functions evaluated so far, so that each is evaluated once
// per input. topdown's own cache is a trie that allocates a node and a
// hash map per key element and is thrown away after each evaluation; this
// one keeps each frame's entries in flat slices under a hash index, and
// the set reuses it for the next evaluation once reset (see evalState), so
// a warm cache allocates nothing. It behaves as topdown's: exact lookups of a
// reference by the equality of its terms, in the top frame only.
type ruleCache struct {
	frames []cacheFrame
	top    int // index of the active frame
	// consts, when not nil, are values the first frame holds from the
	// start (see constantRules).
	consts *constantRules
}

var _ topdown.VirtualCache = (*ruleCache)(nil)

type cacheFrame struct {
	// index maps a reference's hash to its first entry; entries with the
	// same hash are chained through next.
	index   map[uint64]int32
	entries []ruleEntry
	// terms holds the terms of the entries' references: topdown reuses
	// the slices it passes to Put.
	terms []*ast.Term
}

type ruleEntry struct {
	ref       ast.Ref
	value     *ast.Term
	undefined bool
	next      int32
}

// maxPooledEntries bounds what a cache may hold and still be reused: an
// evaluation that cached more (a function called on many distinct
// arguments) leaves its cache to the collector rather than keeping that
// much memory for every later evaluation.
const maxPooledEntries = 1024

func newRuleCache() *ruleCache {
	return &ruleCache{frames: make([]cacheFrame, 1, 2)}
}

// reset empties c for another evaluation and reports whether it is worth
// keeping: false when it grew past maxPooledEntries.
func (c *ruleCache) reset() bool {
	for i := range c.frames {
		f := &c.frames[i]
		if len(f.entries) > maxPooledEntries || len(f.terms) > 8*maxPooledEntries {
			return false
		}
		clear(f.index)
		clear(f.entries)
		clear(f.terms)
		f.entries, f.terms = f.entries[:0], f.terms[:0]
	}
	c.top = 0
	return true
}

// Push implements topdown.VirtualCache.
func (c *ruleCache) Push() {
	c.top++
	if c.top == len(c.frames) {
		c.frames = append(c.frames, cacheFrame{})
	}
}

// Pop implements topdown.VirtualCache.
func (c *ruleCache) Pop() {
	if c.top == 0 {
		return
	}
	f := &c.frames[c.top]
	clear(f.index)
	clear(f.entries)
	clear(f.terms)
	f.entries, f.terms = f.entries[:0], f.terms[:0]
	c.top--
}

func refHash(ref ast.Ref) uint64 {
	h := uint64(len(ref))
	for _, t := range ref {
		h = h*1099511628211 ^ uint64(t.Value.Hash())
	}
	return h
}

func (f *cacheFrame) find(ref ast.Ref, h uint64) *ruleEntry {
	i, ok := f.index[h]
	if !ok {
		return nil
	}
	for i >= 0 {
		e := &f.entries[i]
		if e.ref.Equal(ref) {
			return e
		}
		i = e.next
	}
	return nil
}

// Get implements topdown.VirtualCache: the value cached for ref, or nil
// and whether ref is known to be undefined.
func (c *ruleCache) Get(ref ast.Ref) (*ast.Term, bool) {
	h := refHash(ref)
	e := c.frames[c.top].find(ref, h)
	if e == nil && c.top == 0 && c.consts != nil {
		e = c.consts.find(ref, h)
	}
	switch {
	case e == nil:
		return nil, false
	case e.undefined:
		return nil, true
	}
	return e.value, false
}

// Put implements topdown.VirtualCache: value is ref's value, nil for
// undefined. As in topdown's cache, a reference once undefined stays so.
func (c *ruleCache) Put(ref ast.Ref, value *ast.Term) {
	f := &c.frames[c.top]
	h := refHash(ref)
	e := f.find(ref, h)
	if e == nil {
		start := len(f.terms)
		f.terms = append(f.terms, ref...)
		next, ok := f.index[h]
		if !ok {
			next = -1
		}
		if f.index == nil {
			f.index = make(map[uint64]int32)
		}
		f.index[h] = int32(len(f.entries))
		f.entries = append(f.entries, ruleEntry{ref: f.terms[start:len(f.terms):len(f.terms)], next: next})
		e = &f.entries[len(f.entries)-1]
	}
	if value != nil {
		e.value = value
	} else {
		e.undefined = true
	}
}

// Keys implements topdown.VirtualCache: the references of the top frame
// that have a value.
func (c *ruleCache) Keys() []ast.Ref {
	var keys []ast.Ref
	for _, e := range c.frames[c.top].entries {
		if e.value != nil {
			keys = append(keys, e.ref.Copy())
		}
	}
	if c.top == 0 && c.consts != nil {
		for _, e := range c.consts.entries {
			if c.frames[0].find(e.ref, refHash(e.ref)) == nil {
				keys = append(keys, e.ref.Copy())
			}
		}
	}
	return keys
}
