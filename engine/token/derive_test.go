package token_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/reason"
)

// derivation is what the test's Options.Derive returns: the subject and
// the number of the call that computed it.
type derivation struct {
	sub string
	n   int64
}

// TestVerifyDerived: the derived value is computed once per verification,
// returned with every cache hit, and never outlives the cached token: not
// past its exp, nor past the withdrawal of its key.
func TestVerifyDerived(t *testing.T) {
	k := keys()
	var calls atomic.Int64
	f := newFixture(t, func(o *token.Options) {
		o.CacheMaxAge = 2 * time.Hour
		o.Derive = func(c token.Claims) any {
			return &derivation{sub: c.String("sub"), n: calls.Add(1)}
		}
	})
	ctx := context.Background()
	tok := signClaims(hdr("RS256", "rsa", nil), claims(), k.rsa)
	verify := func(t *testing.T) (*derivation, error) {
		t.Helper()
		c, d, err := f.v.VerifyDerived(ctx, tok)
		if err != nil {
			if c != nil || d != nil {
				t.Fatalf("error %v with claims %v, derived %v", err, c, d)
			}
			return nil, err
		}
		got := d.(*derivation)
		if got.sub != c.String("sub") {
			t.Fatalf("derived from %q, claims of %q", got.sub, c.String("sub"))
		}
		return got, nil
	}
	first, err := verify(t)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := verify(t); err != nil || again != first {
		t.Fatalf("hit: %v, %v; want the value derived at verification", again, err)
	}
	if calls.Load() != 1 {
		t.Fatalf("Derive called %d times, want 1", calls.Load())
	}

	// The key is withdrawn: the token and what was derived from it go.
	f.idp.Serve(jwksJSON(idpKeys()[1:]...), http.StatusOK, "")
	_, _ = f.v.Verify(ctx, signClaims(hdr("RS256", "new", nil), claims(), k.rotated))
	if d, err := verify(t); reason.Of(err, reason.OK) != reason.UnknownKID {
		t.Fatalf("after the key was withdrawn: %v, %v; want unknown-kid", d, err)
	}
	// Published again: verified again, derived again.
	f.idp.Serve(jwksJSON(idpKeys()...), http.StatusOK, "")
	f.clock.Set(t0.Add(10 * time.Minute)) // past the refetch rate limit
	_, _ = f.v.Verify(ctx, signClaims(hdr("RS256", "new2", nil), claims(), k.rotated))
	second, err := verify(t)
	if err != nil {
		t.Fatal(err)
	}
	if second == first || second.n != 2 {
		t.Fatalf("after the key came back: derivation %d, want a new one", second.n)
	}

	// Past exp (and the skew), nothing is served from the cache.
	f.clock.Set(t0.Add(time.Hour + time.Minute))
	if d, err := verify(t); reason.Of(err, reason.OK) != reason.TokenExpired {
		t.Fatalf("after exp: %v, %v; want token-expired", d, err)
	}
}

// TestVerifyWithoutDerive: without Options.Derive nothing is derived.
func TestVerifyWithoutDerive(t *testing.T) {
	f := newFixture(t, nil)
	tok := signClaims(hdr("RS256", "rsa", nil), claims(), keys().rsa)
	for range 2 {
		c, d, err := f.v.VerifyDerived(context.Background(), tok)
		if err != nil || c == nil || d != nil {
			t.Fatalf("VerifyDerived = %v, %v, %v; want claims, nothing derived", c, d, err)
		}
	}
}
