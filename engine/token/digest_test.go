package token_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/reason"
)

// TestDigestAsVerifyDerived: Cached then VerifyDigest answers every token
// as VerifyDerived does, through hits, expiry and re-verification past
// the cache's max age, with the same key lookups and cache counts.
func TestDigestAsVerifyDerived(t *testing.T) {
	k := keys()
	derive := func(c token.Claims) any { return c.String("sub") }
	mod := func(o *token.Options) { o.Derive = derive }
	a, b := newFixture(t, mod), newFixture(t, mod)
	toks := map[string]string{
		"rsa":         signClaims(hdr("RS256", "rsa", nil), claims(), k.rsa),
		"ec":          signClaims(hdr("ES256", "ec", nil), with(map[string]any{"sub": "user-2"}), k.ec),
		"short-lived": signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"exp": t0.Add(5 * time.Minute).Unix()}), k.rsa),
		"expired":     signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"exp": t0.Add(-time.Hour).Unix()}), k.rsa),
		"unknown kid": signClaims(hdr("RS256", "nope", nil), claims(), k.rsa),
		"malformed":   "a.b",
		"empty":       "",
		"oversized":   strings.Repeat("a", token.MaxTokenSize+1),
	}
	ec, other := toks["ec"], signClaims(hdr("ES256", "ec", nil), claims(), k.ec)
	toks["bad signature"] = ec[:strings.LastIndexByte(ec, '.')] + other[strings.LastIndexByte(other, '.'):]
	ctx := context.Background()
	for _, step := range []time.Duration{0, time.Minute, 7 * time.Minute, 11 * time.Minute, 2 * time.Hour} {
		a.clock.Set(t0.Add(step))
		b.clock.Set(t0.Add(step))
		for round := range 2 {
			for name, tok := range toks {
				wantC, wantD, wantErr := a.v.VerifyDerived(ctx, tok)
				d := token.DigestOf(tok)
				gotC, gotD, ok, gotErr := b.v.Cached(&d)
				if !ok {
					gotC, gotD, gotErr = b.v.VerifyDigest(ctx, &d)
				}
				if reason.Of(gotErr, reason.OK) != reason.Of(wantErr, reason.OK) || !reflect.DeepEqual(gotC, wantC) || gotD != wantD {
					t.Fatalf("+%s round %d %s: %v %v %v, want %v %v %v", step, round, name, gotC, gotD, gotErr, wantC, wantD, wantErr)
				}
			}
		}
		if ga, gb := a.v.CacheStats(), b.v.CacheStats(); ga != gb {
			t.Fatalf("+%s: cache %+v, want %+v", step, gb, ga)
		}
		if na, nb := a.keys.n.Load(), b.keys.n.Load(); na != nb {
			t.Fatalf("+%s: %d key lookups, want %d", step, nb, na)
		}
	}
}

// TestCachedCounts: a lookup that finds nothing is counted as a miss only
// when the token is verified (an engine asks caches whose verifier may
// never see the token); a token served past the max age and verified again
// counts as the hit it always did.
func TestCachedCounts(t *testing.T) {
	k := keys()
	f := newFixture(t, nil)
	ctx := context.Background()
	tok := signClaims(hdr("RS256", "rsa", nil), claims(), k.rsa)
	d := token.DigestOf(tok)
	if _, _, ok, err := f.v.Cached(&d); ok || err != nil {
		t.Fatalf("empty cache answered: %v", err)
	}
	if st := f.v.CacheStats(); st != (token.CacheStats{}) {
		t.Fatalf("after a lookup alone: %+v", st)
	}
	if _, _, err := f.v.VerifyDigest(ctx, &d); err != nil {
		t.Fatal(err)
	}
	if st := f.v.CacheStats(); st != (token.CacheStats{Entries: 1, Misses: 1}) {
		t.Fatalf("after the verification: %+v", st)
	}
	if _, _, err := f.v.VerifyDerived(ctx, tok); err != nil {
		t.Fatal(err)
	}
	f.clock.Set(t0.Add(11 * time.Minute))
	if _, _, err := f.v.VerifyDerived(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if n := f.keys.n.Load(); n != 2 {
		t.Fatalf("%d key lookups, want 2: the entry past its max age was not verified again", n)
	}
	if st := f.v.CacheStats(); st != (token.CacheStats{Entries: 1, Hits: 2, Misses: 1}) {
		t.Fatalf("after the re-verification: %+v", st)
	}
	// The zero Digest is an empty token.
	var zero token.Digest
	if _, _, ok, _ := f.v.Cached(&zero); ok {
		t.Fatal("zero digest answered from the cache")
	}
	if _, _, err := f.v.VerifyDigest(ctx, &zero); reason.Of(err, reason.OK) != reason.TokenMissing {
		t.Fatalf("zero digest: %v", err)
	}
}
