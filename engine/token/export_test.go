package token

import "context"

// The steps of Chain.VerifyDerived, for the tests that check each
// against a verification of its own.
type Digest = digest

var DigestOf = digestOf

// DigestHashName names the hash digestOf uses on this CPU.
func DigestHashName() string { return digestHash().name }

func (v *Verifier) Cached(d *Digest) (Claims, any, bool, error) { return v.cached(d) }

func (v *Verifier) VerifyDigest(ctx context.Context, d *Digest) (Claims, any, error) {
	return v.verifyDigest(ctx, d)
}
