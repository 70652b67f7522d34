package introspect

import (
	"crypto/sha256"
	"sync"
)

// shardCount spreads the cache over independently locked maps so that
// concurrent hits rarely contend.
const shardCount = 32

// evictSample is how many entries a full shard looks at to make room:
// the ones past their use go first, else the first one seen (map
// iteration starts at a random position: sampled random eviction).
const evictSample = 8

// entry is one answer of the endpoint about a token.
type entry struct {
	// answer is the active token's answer; nil for active: false.
	answer *Answer
	// fresh is until when the answer is served without asking again
	// (Unix nanoseconds): cache_ttl or negative_cache_ttl after it came,
	// never past the token's exp.
	fresh int64
	// usable is until when an active answer may still be served while
	// the endpoint cannot be asked: the token's exp (fresh when it has
	// none, and for active: false).
	usable int64
}

// cache is a bounded, sharded map from the SHA-256 of a token to the
// endpoint's answer about it. The token itself is never kept.
type cache struct {
	perShard int
	shards   [shardCount]shard
}

type shard struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]entry
	// Keeps neighbouring shards' locks off one cache line.
	_ [40]byte
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

func (c *cache) get(key *[sha256.Size]byte) (entry, bool) {
	s := c.shard(key)
	s.mu.Lock()
	e, ok := s.m[*key]
	s.mu.Unlock()
	return e, ok
}

// put stores e, unless it is already of no use at now. A full shard first
// drops the entries past use among a sample, or one of them.
func (c *cache) put(key *[sha256.Size]byte, e entry, now int64) {
	if now >= e.usable && now >= e.fresh {
		return
	}
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[*key]; !ok && len(s.m) >= c.perShard {
		var victim [sha256.Size]byte
		evicted, seen := false, 0
		for k, old := range s.m {
			if now >= old.usable && now >= old.fresh {
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

func (c *cache) remove(key *[sha256.Size]byte) {
	s := c.shard(key)
	s.mu.Lock()
	delete(s.m, *key)
	s.mu.Unlock()
}

func (c *cache) size() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}
