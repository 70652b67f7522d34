package idtoken

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"
)

// cache keeps the tokens minted for reuse, by a digest of the credential
// and the audience. An entry is served only while it is fresh (more than
// half of the token's lifetime left), of the signing key in force, and
// for the very claims it was minted with (audience, subject, tenant,
// roles, kind), which the decision at hand has just verified: a
// credential whose identity changed (an API key given other roles) gets
// a new token, and two credentials whose digests collide can at most
// share a token that says the same of both. So the digest need not be
// cryptographic: a seeded maphash costs a fraction of a SHA-256 of a
// kilobyte token, on every allowed request.
type cache struct {
	mu   sync.RWMutex
	max  int
	seed maphash.Seed
	m    map[uint64]*entry
}

type entry struct {
	token     string
	refreshAt int64 // unix nanoseconds
	epoch     uint64
	audience  string
	subject   string
	tenantID  string
	kind      string
	roles     []string
}

func newCache(max int) *cache {
	return &cache{max: max, seed: maphash.MakeSeed(), m: make(map[uint64]*entry)}
}

// key is the digest of the credential and the audience, told apart by
// the credential's length.
func (c *cache) key(credential, aud string) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(credential)))
	h.Write(n[:])
	h.WriteString(credential)
	h.WriteString(aud)
	return h.Sum64()
}

func (c *cache) get(key uint64, cl *Claims, epoch uint64, now int64) (string, bool) {
	c.mu.RLock()
	e := c.m[key]
	c.mu.RUnlock()
	if e == nil || now >= e.refreshAt || e.epoch != epoch || e.audience != cl.Audience || e.subject != cl.Subject ||
		e.tenantID != cl.TenantID || e.kind != cl.Kind || !slices.Equal(e.roles, cl.Roles) {
		return "", false
	}
	return e.token, true
}

func (c *cache) put(key uint64, cl *Claims, epoch uint64, token string, refreshAt, now int64) {
	e := &entry{token: token, refreshAt: refreshAt, epoch: epoch, audience: cl.Audience,
		subject: cl.Subject, tenantID: cl.TenantID, kind: cl.Kind, roles: slices.Clone(cl.Roles)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok && len(c.m) >= c.max {
		// Full: drop the entries no longer fresh, or, with none, every
		// entry; each costs one signature to mint again.
		for k, old := range c.m {
			if now >= old.refreshAt {
				delete(c.m, k)
			}
		}
		if len(c.m) >= c.max {
			clear(c.m)
		}
	}
	c.m[key] = e
}

func (c *cache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
