package introspect

import (
	"crypto/sha256"

	"github.com/svc-dev/svc/internal/digestcache"
)

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

// cache is the in-process tier: a digestcache of the endpoint's answers
// by the SHA-256 of the token. The token itself is never kept.
type cache struct {
	m *digestcache.Cache[entry]
}

func newCache(size int) *cache { return &cache{m: digestcache.New[entry](size)} }

func (c *cache) get(key *[sha256.Size]byte) (entry, bool) { return c.m.Get(key) }

// put stores e, unless it is already of no use at now. A full shard first
// drops the entries past use among a sample, or one of them.
func (c *cache) put(key *[sha256.Size]byte, e entry, now int64) {
	spent := func(e entry) bool { return now >= e.usable && now >= e.fresh }
	if spent(e) {
		return
	}
	c.m.Put(key, e, c.m.Epoch(), spent)
}

func (c *cache) remove(key *[sha256.Size]byte) { c.m.Remove(key) }

func (c *cache) size() int { return c.m.Stats().Entries }
