package token

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
)

// shardCount spreads the cache over independently locked maps so that
// concurrent hits rarely contend.
const shardCount = 64

// evictSample is how many entries a full shard looks at to make room:
// expired ones among them go first, else the first one seen. Map iteration
// starts at a random position, so this is sampled random eviction.
const evictSample = 8

// entry is one verified token, tied to the key that verified it.
type entry struct {
	claims Claims
	// derived is Options.Derive's value for claims.
	derived any
	times   times
	// until is when the entry stops being served (Unix nanoseconds):
	// Options.CacheMaxAge after verification, whatever exp says.
	until int64
	// kid and thumbprint name the key that verified the token; the entry
	// is dropped when the key set no longer holds that key.
	kid        string
	thumbprint [sha256.Size]byte
}

// cache is a bounded, sharded map from the SHA-256 of a token to its
// verified claims.
type cache struct {
	perShard int
	// epoch counts retain calls; put refuses entries whose verification
	// began in an earlier epoch.
	epoch  atomic.Uint64
	shards [shardCount]shard
}

type shard struct {
	mu           sync.Mutex
	m            map[[sha256.Size]byte]entry
	hits, misses uint64
	// Keeps neighbouring shards' locks off one cache line.
	_ [32]byte
}

func newCache(size int) *cache {
	c := &cache{perShard: max(1, (size+shardCount-1)/shardCount)}
	for i := range c.shards {
		c.shards[i].m = make(map[[sha256.Size]byte]entry)
	}
	return c
}

func (c *cache) shard(key *[sha256.Size]byte) *shard {
	return &c.shards[key[0]%shardCount]
}

// get returns the entry of key, and counts a hit when there is one. A
// lookup that finds nothing is counted by miss, when the token is
// verified: an engine may look a token up in a cache whose verifier never
// sees it.
func (c *cache) get(key *[sha256.Size]byte) (entry, bool) {
	s := c.shard(key)
	s.mu.Lock()
	e, ok := s.m[*key]
	if ok {
		s.hits++
	}
	s.mu.Unlock()
	return e, ok
}

// miss counts a lookup that found nothing to serve.
func (c *cache) miss(key *[sha256.Size]byte) {
	s := c.shard(key)
	s.mu.Lock()
	s.misses++
	s.mu.Unlock()
}

func (c *cache) remove(key *[sha256.Size]byte) {
	s := c.shard(key)
	s.mu.Lock()
	delete(s.m, *key)
	s.mu.Unlock()
}

// put stores e unless it has already expired at now, or the key set
// changed since the verification began (epoch moved: the key that verified
// it may have been withdrawn meanwhile, and retain has already run). A full
// shard first drops expired entries from a sample, or one random entry.
func (c *cache) put(key *[sha256.Size]byte, e entry, now, skew int64, epoch uint64) {
	if now > e.times.exp+skew || now > e.until {
		return
	}
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.epoch.Load() != epoch {
		return
	}
	if _, ok := s.m[*key]; !ok && len(s.m) >= c.perShard {
		var victim [sha256.Size]byte
		evicted, seen := false, 0
		for k, old := range s.m {
			if now > old.times.exp+skew || now > old.until {
				delete(s.m, k)
				evicted = true
			} else if seen == 0 {
				victim = k
			}
			if seen++; seen == evictSample {
				break
			}
		}
		if !evicted {
			delete(s.m, victim)
		}
	}
	s.m[*key] = e
}

// retain drops every entry whose key keep does not accept, and returns how
// many it dropped. The epoch moves first, under every shard's lock in turn,
// so that a verification still in flight with a withdrawn key cannot put
// its entry after the shard was swept.
func (c *cache) retain(keep func(kid string, thumbprint [sha256.Size]byte) bool) int {
	c.epoch.Add(1)
	dropped := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k, e := range s.m {
			if !keep(e.kid, e.thumbprint) {
				delete(s.m, k)
				dropped++
			}
		}
		s.mu.Unlock()
	}
	return dropped
}

// size returns the number of cached entries.
func (c *cache) size() int {
	return c.stats().Entries
}

func (c *cache) stats() CacheStats {
	var st CacheStats
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

// CacheStats describes the verified-token cache.
type CacheStats struct {
	// Entries is the number of tokens cached now.
	Entries int
	// Hits count the lookups that found the token since the Verifier
	// was created; Misses count the tokens verified in full because the
	// cache did not hold them (a lookup by cached alone is not counted
	// until verifyDigest verifies the token).
	Hits, Misses uint64
}

// CacheStats returns the cache's counters; all zero when the cache is
// disabled.
func (v *Verifier) CacheStats() CacheStats {
	if v.cache == nil {
		return CacheStats{}
	}
	return v.cache.stats()
}
