package token

import (
	"crypto/sha256"

	"github.com/svc-dev/svc/internal/digestcache"
)

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

// cache is the verified-token cache: a digestcache of entries by the
// 256-bit digest of the token (digestOf), whose epoch moves when the key set changes.
type cache struct {
	m *digestcache.Cache[entry]
}

func newCache(size int) *cache { return &cache{m: digestcache.New[entry](size)} }

// get returns the entry of key, and counts a hit when there is one. A
// lookup that finds nothing is counted by miss, when the token is
// verified: an engine may look a token up in a cache whose verifier never
// sees it.
func (c *cache) get(key *digestcache.Key) (entry, bool) { return c.m.Get(key) }

// miss counts a lookup that found nothing to serve.
func (c *cache) miss(key *digestcache.Key) { c.m.Miss(key) }

func (c *cache) remove(key *digestcache.Key) { c.m.Remove(key) }

// epoch is the epoch to read before a verification whose entry put
// stores.
func (c *cache) epoch() uint64 { return c.m.Epoch() }

// put stores e unless it has already expired at now, or the key set
// changed since the verification began (epoch moved: the key that verified
// it may have been withdrawn meanwhile, and retain has already run). A full
// shard first drops expired entries from a sample, or one random entry.
func (c *cache) put(key *digestcache.Key, e entry, now, skew int64, epoch uint64) {
	expired := func(e entry) bool { return now > e.times.exp+skew || now > e.until }
	if expired(e) {
		return
	}
	c.m.Put(key, e, epoch, expired)
}

// retain drops every entry whose key keep does not accept, and returns how
// many it dropped; a verification still in flight with a withdrawn key
// cannot put its entry afterwards.
func (c *cache) retain(keep func(kid string, thumbprint [sha256.Size]byte) bool) int {
	return c.m.Retain(func(e entry) bool { return keep(e.kid, e.thumbprint) })
}

// size returns the number of cached entries.
func (c *cache) size() int {
	return c.stats().Entries
}

func (c *cache) stats() CacheStats {
	st := c.m.Stats()
	return CacheStats{Entries: st.Entries, Hits: st.Hits, Misses: st.Misses}
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
