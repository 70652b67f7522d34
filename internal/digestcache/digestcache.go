// Package digestcache is a bounded, sharded map keyed by a 256-bit
// cryptographic digest of a credential, for caches that must never hold
// the credential itself: the verified-token cache (SHA-256 or BLAKE2b-256) and the
// introspection cache (SHA-256, as its shared Redis tier names tokens).
//
// A full shard makes room by sampled random eviction: it looks at a few
// entries (map iteration starts at a random position), drops the stale
// ones among them, else the first one seen; once a shard has deleted half
// its size in entries, it is copied into a new map, since a Go map does
// not reuse its deleted slots (see rebuildAfter). An epoch, moved by Retain,
// lets a caller refuse an entry whose computation began before a sweep.
package digestcache

import (
	"sync"
	"sync/atomic"
)

// Key is the 256-bit digest of what is cached.
type Key = [32]byte

// Shards is how many independently locked maps a cache is spread over,
// so that concurrent hits rarely contend; a key's shard is its first
// byte modulo Shards.
const Shards = 64

const shardCount = Shards

// evictSample is how many entries a full shard looks at to make room.
const evictSample = 8

// Cache maps keys to values of type V. Its methods are safe for
// concurrent use.
type Cache[V any] struct {
	perShard int
	// epoch counts Retain calls; Put refuses entries whose computation
	// began in an earlier epoch.
	epoch  atomic.Uint64
	shards [shardCount]shard[V]
}

type shard[V any] struct {
	mu           sync.Mutex
	m            map[Key]V
	hits, misses uint64
	// deletes counts the entries deleted since m was built; see Put.
	deletes int
	// Keeps neighbouring shards' locks off one cache line.
	_ [24]byte
}

// New returns a cache of about size entries (at least one per shard).
func New[V any](size int) *Cache[V] {
	c := &Cache[V]{perShard: max(1, (size+shardCount-1)/shardCount)}
	for i := range c.shards {
		c.shards[i].m = make(map[Key]V)
	}
	return c
}

func (c *Cache[V]) shard(k *Key) *shard[V] {
	return &c.shards[k[0]%shardCount]
}

// Get returns the value of k, and counts a hit when there is one. A
// lookup that finds nothing to serve is counted by Miss, when the
// caller computes the value.
func (c *Cache[V]) Get(k *Key) (V, bool) {
	s := c.shard(k)
	s.mu.Lock()
	v, ok := s.m[*k]
	if ok {
		s.hits++
	}
	s.mu.Unlock()
	return v, ok
}

// Miss counts a lookup that found nothing to serve.
func (c *Cache[V]) Miss(k *Key) {
	s := c.shard(k)
	s.mu.Lock()
	s.misses++
	s.mu.Unlock()
}

// Remove drops k.
func (c *Cache[V]) Remove(k *Key) {
	s := c.shard(k)
	s.mu.Lock()
	n := len(s.m)
	delete(s.m, *k)
	if len(s.m) < n {
		s.deletes++
	}
	s.mu.Unlock()
}

// Epoch is the current epoch, to read before computing a value that Put
// will store.
func (c *Cache[V]) Epoch() uint64 { return c.epoch.Load() }

// Put stores v under k unless Retain ran since epoch (the value may rest
// on what it swept). A full shard first drops the entries stale reports
// among a sample (none when stale is nil), else one of them.
func (c *Cache[V]) Put(k *Key, v V, epoch uint64, stale func(V) bool) {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.epoch.Load() != epoch {
		return
	}
	if s.deletes >= rebuildAfter(c.perShard) {
		s.rebuild(c.perShard)
	}
	if _, ok := s.m[*k]; !ok && len(s.m) >= c.perShard {
		var victim Key
		evicted, seen := false, 0
		for key, old := range s.m {
			if stale != nil && stale(old) {
				delete(s.m, key)
				s.deletes++
				evicted = true
			} else if seen == 0 {
				victim = key
			}
			if seen++; seen == evictSample {
				break
			}
		}
		if !evicted {
			delete(s.m, victim)
			s.deletes++
		}
	}
	s.m[*k] = v
}

// rebuildAfter is how many deletions a shard of perShard entries takes
// before Put copies it into a new map. A Go map does not get back the
// slots its deletions leave (tombstones) unless they happen to be
// prunable: under the eviction churn of a full cache it grows, table by
// table, holding the same number of entries in ever more memory. Copying
// the live entries into a map sized for the shard, once per half a
// shard's worth of deletions, keeps it at the size it had when it first
// filled, for about two entry copies per insertion.
func rebuildAfter(perShard int) int { return max(8, perShard/2) }

// rebuild copies the shard's entries into a new map of its bound's size.
func (s *shard[V]) rebuild(perShard int) {
	m := make(map[Key]V, max(perShard, len(s.m)))
	for k, v := range s.m {
		m[k] = v
	}
	s.m, s.deletes = m, 0
}

// Retain drops every entry keep does not accept and returns how many it
// dropped. The epoch moves first, under every shard's lock in turn, so
// that a value computed before cannot be put after its shard was swept.
func (c *Cache[V]) Retain(keep func(V) bool) int {
	c.epoch.Add(1)
	dropped := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k, v := range s.m {
			if !keep(v) {
				delete(s.m, k)
				s.deletes++
				dropped++
			}
		}
		s.mu.Unlock()
	}
	return dropped
}

// Stats are a cache's size and counters.
type Stats struct {
	// Entries is the number of entries now.
	Entries int
	// Hits and Misses count Get's hits and Miss calls.
	Hits, Misses uint64
}

// Stats returns the cache's size and counters.
func (c *Cache[V]) Stats() Stats {
	var st Stats
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		st.Entries += len(s.m)
		st.Hits += s.hits
		st.Misses += s.misses
		s.mu.Unlock()
	}
	return st
}
