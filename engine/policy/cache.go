package policy

import (
	"context"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
)

// DecisionCacheSize is the most decisions one Set keeps in its decision
// cache. A policy activation replaces the Set and with it the cache.
const DecisionCacheSize = 10000

// maxKeySize bounds, in approximate bytes, the key of one cached decision.
// Inputs whose key is larger (a policy keyed on all request headers, say)
// are evaluated every time: they rarely repeat, and they would make the
// cache's memory a multiple of the input size.
const maxKeySize = 1024

// cacheShards splits the cache so that concurrent decisions seldom wait on
// one another; a power of two.
const cacheShards = 16

// Decide returns the decision Eval would return for in, from the set's
// decision cache when an earlier input agreed with in on every part of
// input the policy can read (see CacheKeys). A cached decision gets a fresh
// DecisionID and the set's revision; its DenyReasons are a copy. Errors are
// never cached, and a set whose policy depends on more than its input and
// data (the clock, the network, randomness, `with`) evaluates every time.
//
// A hit builds only the values at the key paths from in, not the whole
// input document; a miss builds the document once and evaluates it. The
// cache assumes the data document (see Data and Storage) never changes,
// which holds for every set this package builds.
func (s *Set) Decide(ctx context.Context, in Input) (Result, error) {
	c := s.cache
	if c == nil || ctx.Err() != nil {
		return s.Eval(ctx, in)
	}
	var parts [8]keyPart
	k, whole, err := c.lazyKey(&in, parts[:0])
	if err != nil {
		// Eval reports the input that cannot be converted.
		return s.Eval(ctx, in)
	}
	sh := &c.shards[k.hash%cacheShards]
	if e := sh.lookup(k); e != nil {
		sh.hits.Add(1)
		return Result{
			Allow:       e.allow,
			DenyReasons: slices.Clone(e.reasons),
			DecisionID:  NewDecisionID(),
			Revision:    s.revision,
		}, nil
	}
	sh.misses.Add(1)
	if whole == nil {
		k.materialize()
		whole = c.document(k.parts)
	}
	res, err := s.eval(ctx, whole)
	if err == nil && k.size <= maxKeySize {
		sh.insert(k, &cacheEntry{parts: detach(k.parts), allow: res.Allow, reasons: slices.Clone(res.DenyReasons)})
	}
	return res, err
}

// CacheStats reports the decision cache: lookups answered from it (hits)
// and lookups that evaluated (misses, inputs too large to keep included)
// since the set was built, the
// decisions it holds, and whether the set caches at all. Copies made with
// WithRevision share the cache and so the figures.
func (s *Set) CacheStats() (hits, misses uint64, entries int, enabled bool) {
	c := s.cache
	if c == nil {
		return 0, 0, 0, false
	}
	for i := range c.shards {
		sh := &c.shards[i]
		hits += sh.hits.Load()
		misses += sh.misses.Load()
		sh.mu.RLock()
		entries += sh.n
		sh.mu.RUnlock()
	}
	return hits, misses, entries, true
}

// CacheKeys lists the parts of input the decision cache keys on, as
// references such as "input.user.roles"; "input" alone means the whole
// input. When the set does not cache, paths is nil and disabled says why,
// naming the file and line of the first construct that prevents it.
func (s *Set) CacheKeys() (paths []string, disabled string) {
	if s.plan.disabled != "" {
		return nil, s.plan.disabled
	}
	paths = make([]string, len(s.plan.paths))
	for i, p := range s.plan.paths {
		paths[i] = pathString(p)
	}
	return paths, ""
}

// ReadsRequestParts reports whether an evaluation of the set can observe
// input.request.headers (headers) and input.request.query (query). Both
// are true when the set does not cache decisions: its plan is then not
// known to cover every read. A caller that builds those maps only when
// they can be read gives the policy the same decisions.
func (s *Set) ReadsRequestParts() (headers, query bool) {
	c := s.cache
	if c == nil {
		return true, true
	}
	return c.readsHeaders, c.readsQuery
}

// decisionCache maps the key parts of inputs to decisions. Each shard is
// bounded and evicts with the clock algorithm: an entry that was hit since
// the hand last passed gets a second chance.
type decisionCache struct {
	paths [][]*ast.Term
	// leaves are the leaf fields of paths, index by index (leafOf; an
	// empty path, the whole input, has leafNone).
	leaves []leafField
	// readsHeaders and readsQuery say whether some path reaches into
	// input.request.headers or input.request.query (or is above them).
	readsHeaders, readsQuery bool

	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

func newDecisionCache(plan cachePlan, size int) *decisionCache {
	c := &decisionCache{paths: plan.paths, leaves: make([]leafField, len(plan.paths)), seed: maphash.MakeSeed()}
	for i, path := range plan.paths {
		if len(path) > 0 {
			c.leaves[i] = leafOf(path)
		}
	}
	c.readsHeaders = plan.reads(keyRequest, keyHeaders)
	c.readsQuery = plan.reads(keyRequest, keyQuery)
	per := max(1, size/cacheShards)
	for i := range c.shards {
		c.shards[i].capacity = per
	}
	return c
}

// cacheKey is an input's key: its parts, their hash and their size.
type cacheKey struct {
	parts []keyPart
	hash  uint64
	size  int
}

// key extracts the key of in, appending its parts to buf. Only the parts
// of the document under the key paths are built, unless a path is the
// whole input: then whole is the document, for evaluation to reuse.
func (c *decisionCache) key(in *Input, buf []keyPart) (k cacheKey, whole ast.Value, err error) {
	k, whole, err = c.lazyKey(in, buf)
	if err == nil {
		k.materialize()
	}
	return k, whole, err
}

// materialize sets the value of every part (keyPart.materialize).
func (k *cacheKey) materialize() {
	for i := range k.parts {
		k.parts[i].materialize()
	}
}

// lazyKey is key, except that parts read from string fields hold the
// strings rather than AST values (see keyPart): enough to look a decision
// up, which then builds no value at all.
func (c *decisionCache) lazyKey(in *Input, buf []keyPart) (k cacheKey, whole ast.Value, err error) {
	// Value fails exactly when the claims cannot be converted; so must the
	// key, or a hit would answer an input that evaluation rejects.
	claims, err := in.checkClaims()
	if err != nil {
		return cacheKey{}, nil, err
	}
	var kh keyHasher
	kh.h.SetSeed(c.seed)
	// The terms of parts that are not plain strings, allocated when the
	// first is built.
	var b termBuf
	for i, path := range c.paths {
		if len(path) == 0 {
			if whole, err = in.Value(); err != nil {
				return cacheKey{}, nil, err
			}
			buf = append(buf, keyPart{v: whole})
			kh.part(&buf[len(buf)-1])
			continue
		}
		// Built in place: a part is large.
		buf = append(buf, keyPart{})
		p := &buf[len(buf)-1]
		if err = typedPartInto(in, path, c.leaves[i], &b, claims, p); err != nil {
			return cacheKey{}, nil, err
		}
		kh.part(p)
	}
	return cacheKey{parts: buf, hash: kh.h.Sum64(), size: kh.size}, whole, nil
}

// cacheEntry is one cached decision; it never changes once stored.
type cacheEntry struct {
	parts   []keyPart
	allow   bool
	reasons []string
}

type cacheSlot struct {
	hash  uint64
	entry *cacheEntry
	// used is set on a hit, under the read lock, and cleared by the hand.
	used atomic.Bool
}

type cacheShard struct {
	mu       sync.RWMutex
	index    map[uint64]int32 // hash → slot
	slots    []cacheSlot      // allocated on the first insert
	n        int              // slots in use
	hand     int
	capacity int

	hits, misses atomic.Uint64
	// Shards sit side by side; padding keeps their counters and locks
	// off one another's cache lines.
	_ [64]byte
}

// lookup returns the entry whose key is k's, nil when there is none. An
// entry with the same hash but another key is a miss.
func (sh *cacheShard) lookup(k cacheKey) *cacheEntry {
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	i, ok := sh.index[k.hash]
	if !ok {
		return nil
	}
	slot := &sh.slots[i]
	if !sameParts(slot.entry.parts, k.parts) {
		return nil
	}
	if !slot.used.Load() {
		slot.used.Store(true)
	}
	return slot.entry
}

// insert stores e under k's hash, replacing what was there (the same
// decision, computed concurrently, or a colliding key) or, when the shard
// is full, the first entry the hand finds unused.
func (sh *cacheShard) insert(k cacheKey, e *cacheEntry) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i, ok := sh.index[k.hash]; ok {
		sh.slots[i].entry = e
		return
	}
	if sh.slots == nil {
		sh.slots = make([]cacheSlot, sh.capacity)
		sh.index = make(map[uint64]int32, sh.capacity)
	}
	i := sh.n
	if sh.n < sh.capacity {
		sh.n++
	} else {
		for {
			slot := &sh.slots[sh.hand]
			if !slot.used.Load() {
				break
			}
			slot.used.Store(false)
			sh.hand = (sh.hand + 1) % sh.capacity
		}
		i = sh.hand
		sh.hand = (sh.hand + 1) % sh.capacity
		delete(sh.index, sh.slots[i].hash)
	}
	slot := &sh.slots[i]
	slot.hash, slot.entry = k.hash, e
	slot.used.Store(false)
	sh.index[k.hash] = int32(i)
}
