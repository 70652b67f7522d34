package token_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/reason"
)

func TestVerifyRotation(t *testing.T) {
	k := keys()
	f := newFixture(t, nil)
	ctx := context.Background()
	old := signClaims(hdr("RS256", "rsa", nil), claims(), k.rsa)
	next := signClaims(hdr("RS256", "rotated", nil), claims(), k.rotated)

	if _, err := f.v.Verify(ctx, old); err != nil {
		t.Fatalf("old key before rotation: %v", err)
	}
	if _, err := f.v.Verify(ctx, next); reason.Of(err, reason.OK) != reason.UnknownKID {
		t.Fatalf("new key before rotation: %v, want unknown-kid", err)
	}
	f.idp.Serve(jwksJSON(append(idpKeys(), rsaJWK("rotated", &k.rotated.PublicKey, "RS256"))...), http.StatusOK, "")
	if _, err := f.v.Verify(ctx, next); err != nil {
		t.Fatalf("new key after rotation: %v", err)
	}
	if n := f.idp.Requests(); n != 3 {
		t.Fatalf("idp requests = %d, want 3", n)
	}
}

func TestVerifyJWKSDown(t *testing.T) {
	k := keys()
	ctx := context.Background()
	tok := signClaims(hdr("ES256", "ec", nil), claims(), k.ec)

	t.Run("keys cached", func(t *testing.T) {
		// No verified-token cache: each Verify checks the signature.
		f := newFixture(t, func(o *token.Options) { o.CacheSize = -1 })
		if _, err := f.v.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
		f.idp.Serve([]byte("down"), http.StatusServiceUnavailable, "")
		for range 3 {
			if _, err := f.v.Verify(ctx, tok); err != nil {
				t.Fatalf("verify while the IdP is down: %v", err)
			}
		}
		if _, err := f.v.Verify(ctx, signClaims(hdr("ES256", "new", nil), claims(), k.ec)); reason.Of(err, reason.OK) != reason.UnknownKID {
			t.Fatalf("unknown kid while down: %v", err)
		}
		if st := f.cache.Status(); !st.Partitioned || st.Keys == 0 {
			t.Fatalf("status = %+v, want partitioned with keys", st)
		}
	})
	t.Run("nothing cached", func(t *testing.T) {
		f := newFixture(t, nil)
		f.idp.Serve(nil, http.StatusInternalServerError, "")
		if _, err := f.v.Verify(ctx, tok); reason.Of(err, reason.OK) != reason.JWKSUnavailable {
			t.Fatalf("err = %v, want jwks-unavailable", err)
		}
	})
	t.Run("idp unreachable", func(t *testing.T) {
		f := newFixture(t, nil)
		f.idp.Srv.Close()
		if _, err := f.v.Verify(ctx, tok); reason.Of(err, reason.OK) != reason.JWKSUnavailable {
			t.Fatalf("err = %v, want jwks-unavailable", err)
		}
	})
}

func TestVerifyRandomKIDFlood(t *testing.T) {
	k := keys()
	const burst = 3
	f := newFixture(t, nil)
	c, err := jwks.New(jwks.Options{URL: f.idp.Srv.URL, Client: f.idp.Srv.Client(), Now: f.clock.Now, UnknownKIDBurst: burst})
	if err != nil {
		t.Fatal(err)
	}
	v, err := token.New(token.Options{Keys: c, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	// Attackers sign with their own key; only the kid varies.
	base := claims()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	for g := range 50 {
		wg.Go(func() {
			for i := range 20 {
				tok := signClaims(hdr("RS256", fmt.Sprintf("kid-%d-%d", g, i), nil), base, k.attacker)
				if _, err := v.Verify(context.Background(), tok); reason.Of(err, reason.OK) != reason.UnknownKID {
					mu.Lock()
					bad = append(bad, fmt.Sprint(err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d tokens not refused as unknown-kid, first: %s", len(bad), bad[0])
	}
	if n := f.idp.Requests(); n < 1 || n > burst {
		t.Fatalf("idp requests = %d for 1000 random kids, want 1..%d", n, burst)
	}
}
