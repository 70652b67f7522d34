package token

import (
	"context"

	"github.com/svc-dev/svc/internal/digestcache"
	"github.com/svc-dev/svc/reason"
)

// digest is a token with its 256-bit digest (digestHash), the key of the
// verified-token cache. Chain.VerifyDerived hashes a token once with
// digestOf and asks each verifier's cache with cached before any
// verification with verifyDigest. The digest is not keyed: the digest of
// a signed token reveals nothing an attacker could use, and the cache
// lives only in the process.
type digest struct {
	raw string
	sum digestcache.Key
	// hashed says sum is raw's: raw is neither empty nor oversized.
	hashed bool
	// stale is the cache in which cached found the token served past
	// Options.CacheMaxAge: that lookup counted as a hit, so the
	// verification that follows is not counted as a miss there.
	stale *cache
}

// digestOf hashes raw (the token without the "Bearer " prefix) with
// digestHash. An empty or oversized token is not hashed: no cache holds
// it, and verifyDigest refuses it.
func digestOf(raw string) digest {
	d := digest{raw: raw}
	if raw != "" && len(raw) <= MaxTokenSize {
		// The hash only reads the bytes; aliasing the string avoids a
		// copy on the hot path.
		d.sum = digestHash().sum(unsafeBytes(raw))
		d.hashed = true
	}
	return d
}

// cached answers d's token from the cache alone: ok reports whether it
// did, with the token's claims and derived value (see VerifyDerived), or
// with the error of a cached token no longer valid at the current time
// (expired meanwhile; the entry is dropped). When ok is false (not
// cached, cache disabled, or served past Options.CacheMaxAge and dropped)
// the token must be verified with verifyDigest.
func (v *Verifier) cached(d *digest) (claims Claims, derived any, ok bool, err error) {
	if v.cache == nil || !d.hashed {
		return nil, nil, false, nil
	}
	e, found := v.cache.get(&d.sum)
	if !found {
		return nil, nil, false, nil
	}
	now := v.now().UnixNano()
	if err := v.checkTimes(e.times, now); err != nil {
		v.cache.remove(&d.sum)
		return nil, nil, true, err
	}
	if now <= e.until {
		return e.claims, e.derived, true, nil
	}
	// Served long enough: verify again against the current keys.
	v.cache.remove(&d.sum)
	d.stale = v.cache
	return nil, nil, false, nil
}

// verifyDigest verifies d's token in full, as VerifyDerived does on a
// cache miss, and caches the result. Call it when cached answered no.
func (v *Verifier) verifyDigest(ctx context.Context, d *digest) (Claims, any, error) {
	raw := d.raw
	if raw == "" {
		return nil, nil, reason.New(reason.TokenMissing, "no token")
	}
	if len(raw) > MaxTokenSize {
		return nil, nil, reason.New(reason.TokenMalformed, "token exceeds %d bytes", MaxTokenSize)
	}
	var epoch uint64
	if v.cache != nil {
		if !d.hashed {
			*d = digestOf(raw)
		}
		// The epoch is read before the key lookup: put refuses the entry
		// if the key set changed during the verification.
		epoch = v.cache.epoch()
		if d.stale != v.cache {
			v.cache.miss(&d.sum)
		}
	}
	claims, ts, key, err := v.verify(ctx, raw)
	if err != nil {
		return nil, nil, err
	}
	var derived any
	if v.derive != nil {
		derived = v.derive(claims)
	}
	if v.cache != nil {
		now := v.now().UnixNano()
		v.cache.put(&d.sum, entry{claims: claims, derived: derived, times: ts, until: now + v.maxAge, kid: key.ID, thumbprint: key.Thumbprint},
			now, v.skew, epoch)
	}
	return claims, derived, nil
}
