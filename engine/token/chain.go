package token

import (
	"context"
	"errors"

	"github.com/svc-dev/svc/reason"
)

// Chain is the verifiers of one deployment's tokens, asked in order: a
// token whose kid a verifier's keys do not hold (reason.UnknownKID) goes
// on to the next, and a token with a kid a verifier holds is judged by
// that verifier alone. The engine chains the verifier of the SAML
// gateway's tokens, whose fixed local keys answer an unknown kid at once,
// before the JWKS one, which would try to refresh on it.
//
// Chain.VerifyDerived is the one way a token is verified: the token is
// hashed once, and every cache of the chain is asked before any verifier
// verifies, so that a cached token costs one hash and one lookup per
// cache, never a header parse. Asking a later cache before an earlier
// verifier judges gives the same answers: a later verifier only ever
// sees tokens the earlier ones refused with unknown kid, and they refuse
// them so again as long as their keys are fixed, the checks before the
// key lookup depending on the token alone.
type Chain []*Verifier

// VerifyDerived verifies raw (the token without the "Bearer " prefix) and
// returns its claims and what the verifying verifier's Options.Derive
// computed from them (on a cache hit, the value computed when the token
// was verified). Every error is a *reason.Error, the last verifier's when
// every one refused the token's kid; an empty chain refuses every token
// with issuer-unknown.
func (c Chain) VerifyDerived(ctx context.Context, raw string) (Claims, any, error) {
	if len(c) == 0 {
		// A deployment whose identity sources verify no token (API keys
		// only): no issuer of tokens is trusted.
		return nil, nil, reason.New(reason.IssuerUnknown, "no identity provider of bearer tokens is configured")
	}
	d, claims, derived, ok, err := c.fromCaches(raw)
	if ok {
		return claims, derived, err
	}
	for i, v := range c {
		claims, derived, err := v.verifyDigest(ctx, &d)
		if err == nil || i == len(c)-1 || !unknownKID(err) {
			return claims, derived, err
		}
	}
	return nil, nil, reason.New(reason.UnknownKID, "no verifier for the token")
}

// unknownKID reports whether err refuses a token for a kid the keys do
// not hold. Apart, so that a verification that succeeds does not pay for
// the *reason.Error errors.As needs.
func unknownKID(err error) bool {
	var re *reason.Error
	return errors.As(err, &re) && re.Code == reason.UnknownKID
}

// caching reports whether any verifier of c caches: without a cache the
// hash is of no use, and only the token is kept.
// fromCaches hashes raw once (when any verifier caches) and asks every
// verifier's cache for it, in order: ok reports that one answered, with
// the token's claims and derived value or the error of a cached token no
// longer valid. The digest is for the verification that follows a miss.
func (c Chain) fromCaches(raw string) (d digest, claims Claims, derived any, ok bool, err error) {
	d = digest{raw: raw}
	if c.caching() {
		d = digestOf(raw)
	}
	for _, v := range c {
		if claims, derived, ok, err = v.cached(&d); ok {
			return d, claims, derived, true, err
		}
	}
	return d, nil, nil, false, nil
}

func (c Chain) caching() bool {
	for _, v := range c {
		if v.cache != nil {
			return true
		}
	}
	return false
}
