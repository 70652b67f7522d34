package policy

import (
	"context"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
)

// DefaultDecisionCacheSize is the most decisions one Set keeps in its
// decision cache unless DecisionCacheSize says otherwise: room for a
// decision per tenant of ten thousand, and for a few per user of as many,
// in about 250 bytes each on the default policy. A policy activation
// replaces the Set and with it the cache.
const DefaultDecisionCacheSize = 32768

// DecisionCacheSize bounds the set's decision cache to about entries
// decisions (rounded down to a multiple of its 16 shards, at least one
// each); 0 turns the cache off, so that every decision evaluates.
func DecisionCacheSize(entries int) Option {
	return func(o *options) { o.cacheSize = &entries }
}

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
	var (
		parts [8]keyPart
		ke    keyEnc
	)
	k, whole, err := c.lazyKey(&in, parts[:0], &ke)
	if err != nil {
		// Eval reports the input that cannot be converted.
		return s.Eval(ctx, in)
	}
	if k.opaque {
		return s.Eval(ctx, in)
	}
	sh := &c.shards[k.hash%cacheShards]
	if allow, reasons, ok := sh.lookup(&k); ok {
		sh.hits.Add(1)
		return Result{
			Allow:       allow,
			DenyReasons: slices.Clone(reasons),
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
	if err == nil && len(k.key) <= maxKeySize {
		sh.insert(&k, res.Allow, slices.Clone(res.DenyReasons))
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
		entries += len(sh.entries)
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

// cacheKey is an input's key: its parts, their encoding (keyEnc) and its
// hash; opaque when the encoding is not faithful and the input must not
// be cached.
type cacheKey struct {
	parts  []keyPart
	key    []byte
	hash   uint64
	opaque bool
}

// key extracts the key of in, appending its parts to buf and writing its
// encoding with ke, which it resets first. Only the parts of the document under the key paths are built,
// unless a path is the whole input: then whole is the document, for
// evaluation to reuse.
func (c *decisionCache) key(in *Input, buf []keyPart, ke *keyEnc) (k cacheKey, whole ast.Value, err error) {
	k, whole, err = c.lazyKey(in, buf, ke)
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
func (c *decisionCache) lazyKey(in *Input, buf []keyPart, ke *keyEnc) (k cacheKey, whole ast.Value, err error) {
	// Value fails exactly when the claims cannot be converted; so must the
	// key, or a hit would answer an input that evaluation rejects.
	claims, err := in.checkClaims()
	if err != nil {
		return cacheKey{}, nil, err
	}
	ke.reset()
	// The terms of parts that are not plain strings, allocated when the
	// first is built.
	var b termBuf
	for i, path := range c.paths {
		if len(path) == 0 {
			if whole, err = in.Value(); err != nil {
				return cacheKey{}, nil, err
			}
			buf = append(buf, keyPart{v: whole})
			ke.part(&buf[len(buf)-1])
			continue
		}
		// Built in place: a part is large.
		buf = append(buf, keyPart{})
		p := &buf[len(buf)-1]
		if err = typedPartInto(in, path, c.leaves[i], &b, claims, p); err != nil {
			return cacheKey{}, nil, err
		}
		ke.part(p)
	}
	key := ke.bytes()
	return cacheKey{parts: buf, key: key, hash: maphash.Bytes(c.seed, key), opaque: ke.opaque}, whole, nil
}

// cacheEntry is one cached decision. Its key is the input's key encoding
// (keyEnc), kept whole: a lookup compares it with the input's, so a hash
// collision costs an evaluation and never a wrong decision. A key of up
// to inlineKey bytes (most are) sits in the entry itself, beside the
// hash, and a hit reads no other memory; a longer one is in long.
type cacheEntry struct {
	hash uint64
	// n is the key's length.
	n     uint32
	allow bool
	// used is set on a hit, under the read lock, and cleared by the hand.
	used    atomic.Bool
	inline  [inlineKey]byte
	long    string
	reasons []string
}

// inlineKey holds the key of the default policy (about 100 bytes: seven
// parts of short strings) and makes an entry 192 bytes, three cache lines
// that a table larger than 32 KiB lines up on; a hit then reads one slot
// and one entry, whose lines are adjacent.
const inlineKey = 128

// keyIs reports whether the entry's key is key.
func (e *cacheEntry) keyIs(key []byte) bool {
	if int(e.n) != len(key) {
		return false
	}
	if len(key) <= inlineKey {
		return string(e.inline[:len(key)]) == string(key)
	}
	return e.long == string(key)
}

// setKey stores key in the entry.
func (e *cacheEntry) setKey(key []byte) {
	e.n, e.long = uint32(len(key)), ""
	if len(key) <= inlineKey {
		copy(e.inline[:], key)
		return
	}
	e.long = string(key)
}

// cacheShard holds up to capacity entries in one slice, found through an
// open-addressed table with linear probing kept at most half full. A slot
// of the table is 0 when free, or else the high half of its entry's hash
// beside the entry's index plus one: a lookup reads the slot, and the
// entry only when the halves agree. A hit at any size then touches the
// slot, the entry and its key, and no Go map.
type cacheShard struct {
	mu       sync.RWMutex
	table    []uint64
	entries  []cacheEntry // grown on insert up to capacity
	hand     int
	capacity int

	hits, misses atomic.Uint64
	// Shards sit side by side; padding keeps their counters and locks
	// off one another's cache lines.
	_ [64]byte
}

// hashTag is the high half of a hash, which places an entry in the table
// (the low bits pick its shard).
func hashTag(h uint64) uint32 { return uint32(h >> 32) }

func slotOf(tag uint32, i int) uint64 { return uint64(tag)<<32 | uint64(i+1) }

// find returns the table position of k's entry, or -1.
func (sh *cacheShard) find(k *cacheKey) int {
	if sh.table == nil {
		return -1
	}
	mask := uint32(len(sh.table) - 1)
	tag := hashTag(k.hash)
	for p := tag & mask; ; p = (p + 1) & mask {
		s := sh.table[p]
		if s == 0 {
			return -1
		}
		if uint32(s>>32) != tag {
			continue
		}
		if e := &sh.entries[uint32(s)-1]; e.hash == k.hash && e.keyIs(k.key) {
			return int(p)
		}
	}
}

// lookup returns the decision stored under k's key.
func (sh *cacheShard) lookup(k *cacheKey) (allow bool, reasons []string, ok bool) {
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	p := sh.find(k)
	if p < 0 {
		return false, nil, false
	}
	e := &sh.entries[uint32(sh.table[p])-1]
	if !e.used.Load() {
		e.used.Store(true)
	}
	// reasons is never written once stored: a new decision gets a new
	// slice.
	return e.allow, e.reasons, true
}

// insert stores a decision under k's key, replacing what was there (the
// same decision, computed concurrently) or, when the shard is full, the
// first entry the hand finds unused.
func (sh *cacheShard) insert(k *cacheKey, allow bool, reasons []string) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if p := sh.find(k); p >= 0 {
		e := &sh.entries[uint32(sh.table[p])-1]
		e.allow, e.reasons = allow, reasons
		return
	}
	var i int
	if len(sh.entries) < sh.capacity {
		i = len(sh.entries)
		sh.entries = append(sh.entries, cacheEntry{})
		if 2*len(sh.entries) > len(sh.table) {
			sh.grow()
		}
	} else {
		for {
			e := &sh.entries[sh.hand]
			if !e.used.Load() {
				break
			}
			e.used.Store(false)
			sh.hand = (sh.hand + 1) % sh.capacity
		}
		i = sh.hand
		sh.hand = (sh.hand + 1) % sh.capacity
		sh.remove(i)
	}
	e := &sh.entries[i]
	e.hash, e.allow, e.reasons = k.hash, allow, reasons
	e.setKey(k.key)
	e.used.Store(false)
	sh.place(hashTag(k.hash), i)
}

// place puts entry i, whose hash has tag, in the first free slot from its
// home.
func (sh *cacheShard) place(tag uint32, i int) {
	mask := uint32(len(sh.table) - 1)
	p := tag & mask
	for sh.table[p] != 0 {
		p = (p + 1) & mask
	}
	sh.table[p] = slotOf(tag, i)
}

// grow doubles the table (from 16 slots) and places every entry anew.
func (sh *cacheShard) grow() {
	sh.table = make([]uint64, max(16, 2*len(sh.table)))
	for i := range sh.entries[:len(sh.entries)-1] {
		sh.place(hashTag(sh.entries[i].hash), i)
	}
}

// remove takes entry i out of the table, moving back the slots after it
// that its slot kept from their homes, so that no probe stops short.
func (sh *cacheShard) remove(i int) {
	mask := uint32(len(sh.table) - 1)
	tag := hashTag(sh.entries[i].hash)
	want := slotOf(tag, i)
	p := tag & mask
	for sh.table[p] != want {
		p = (p + 1) & mask
	}
	for {
		sh.table[p] = 0
		q := p
		for {
			q = (q + 1) & mask
			s := sh.table[q]
			if s == 0 {
				return
			}
			// s may fill p when p lies between its home and q.
			if home := uint32(s>>32) & mask; (q-home)&mask >= (q-p)&mask {
				sh.table[p] = s
				p = q
				break
			}
		}
	}
}
