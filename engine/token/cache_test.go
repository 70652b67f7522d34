package token_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/reason"
)

func TestCacheHit(t *testing.T) {
	k := keys()
	tok := signClaims(hdr("RS256", "rsa", nil), claims(), k.rsa)
	exp := t0.Add(time.Hour)
	steps := []struct {
		name    string
		now     time.Time
		want    reason.Code
		lookups int64 // key lookups so far: 0 more means a cache hit
	}{
		{"first verification", t0, reason.OK, 1},
		{"hit", t0.Add(time.Minute), reason.OK, 1},
		{"hit within skew after exp", exp.Add(29 * time.Second), reason.OK, 1},
		{"hit beyond skew after exp", exp.Add(31 * time.Second), reason.TokenExpired, 1},
		{"entry dropped once expired", exp.Add(31 * time.Second), reason.TokenExpired, 2},
	}
	// The lifetime cap is beyond exp here, so that hits are seen up to exp.
	f := newFixture(t, func(o *token.Options) { o.CacheMaxAge = 2 * time.Hour })
	var first token.Claims
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			f.clock.Set(s.now)
			got, err := f.v.Verify(context.Background(), tok)
			if code := reason.Of(err, reason.OK); code != s.want {
				t.Fatalf("code = %q (%v), want %q", code, err, s.want)
			}
			if n := f.keys.n.Load(); n != s.lookups {
				t.Fatalf("key lookups = %d, want %d", n, s.lookups)
			}
			if err == nil {
				if first == nil {
					first = got
				} else if reflect.ValueOf(got).Pointer() != reflect.ValueOf(first).Pointer() {
					t.Fatal("a hit did not return the cached claims")
				}
			}
		})
	}
}

func TestCacheHitRechecksNotBefore(t *testing.T) {
	k := keys()
	f := newFixture(t, nil)
	tok := signClaims(hdr("ES256", "ec", nil), with(map[string]any{"nbf": t0.Unix(), "iat": t0.Add(10 * time.Minute).Unix()}), k.ec)
	// iat is 10 minutes ahead: refused on verification...
	if _, err := f.v.Verify(context.Background(), tok); reason.Of(err, reason.OK) != reason.TokenIssuedInFuture {
		t.Fatalf("err = %v, want token-issued-in-future", err)
	}
	// ...accepted once the clock catches up, and then cached.
	f.clock.Set(t0.Add(10 * time.Minute))
	if _, err := f.v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	// A clock stepped back is seen on the cached entry too.
	f.clock.Set(t0.Add(-time.Minute))
	if _, err := f.v.Verify(context.Background(), tok); reason.Of(err, reason.OK) != reason.TokenNotYetValid {
		t.Fatalf("err = %v, want token-not-yet-valid", err)
	}
	if n := f.keys.n.Load(); n != 2 {
		t.Fatalf("key lookups = %d, want 2 (the last call was a hit)", n)
	}
	// The failed hit dropped the entry.
	if st := f.v.CacheStats(); st != (token.CacheStats{Entries: 0, Hits: 1, Misses: 2}) {
		t.Fatalf("cache stats = %+v", st)
	}
}

func TestCacheFailuresNotCached(t *testing.T) {
	k := keys()
	f := newFixture(t, nil)
	tok := signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"tenant_id": nil}), k.rsa)
	for range 3 {
		if _, err := f.v.Verify(context.Background(), tok); reason.Of(err, reason.OK) != reason.TenantMissing {
			t.Fatalf("err = %v, want tenant-missing", err)
		}
	}
	if n := f.keys.n.Load(); n != 3 {
		t.Fatalf("key lookups = %d, want 3", n)
	}
}

func TestCacheConcurrent(t *testing.T) {
	k := keys()
	f := newFixture(t, func(o *token.Options) { o.CacheSize = 64 })
	toks := make([]string, 200)
	for i := range toks {
		toks[i] = signClaims(hdr("ES256", "ec", nil), with(map[string]any{"jti": fmt.Sprint(i)}), k.ec)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 400 {
				tok := toks[(g*31+i)%len(toks)]
				c, err := f.v.Verify(context.Background(), tok)
				if err != nil {
					errs <- err
					return
				}
				if c.String("tenant_id") != "acme" {
					errs <- fmt.Errorf("wrong claims")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestCacheLifetimeCap(t *testing.T) {
	k := keys()
	// A leaked key can sign tokens that expire centuries ahead.
	tok := signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"exp": t0.AddDate(200, 0, 0).Unix()}), k.rsa)
	steps := []struct {
		name    string
		after   time.Duration
		lookups int64
	}{
		{"first verification", 0, 1},
		{"hit within the cap", 9 * time.Minute, 1},
		{"verified again after the default 10 minutes", 11 * time.Minute, 2},
		{"hit again after the new verification", 12 * time.Minute, 2},
	}
	f := newFixture(t, nil)
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			f.clock.Set(t0.Add(s.after))
			if _, err := f.v.Verify(context.Background(), tok); err != nil {
				t.Fatal(err)
			}
			if n := f.keys.n.Load(); n != s.lookups {
				t.Fatalf("key lookups = %d, want %d", n, s.lookups)
			}
		})
	}
}

func TestCacheDropsTokensOfWithdrawnKeys(t *testing.T) {
	k := keys()
	others := idpKeys()[1:] // everything but "rsa"
	tests := []struct {
		name string
		// next is the set the IdP publishes after the token was cached.
		next []map[string]any
		want reason.Code
	}{
		{"key withdrawn", others, reason.UnknownKID},
		{"kid kept, key material replaced", append([]map[string]any{rsaJWK("rsa", &k.rotated.PublicKey, "")}, others...), reason.SignatureInvalid},
		{"key kept", append(idpKeys(), rsaJWK("new", &k.rotated.PublicKey, "")), reason.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			ctx := context.Background()
			tok := signClaims(hdr("RS256", "rsa", nil), claims(), k.rsa)
			for range 2 {
				if _, err := f.v.Verify(ctx, tok); err != nil {
					t.Fatal(err)
				}
			}
			if st := f.v.CacheStats(); st.Entries != 1 || st.Hits != 1 {
				t.Fatalf("cache stats = %+v, want the token cached", st)
			}
			f.idp.Serve(jwksJSON(tt.next...), http.StatusOK, "")
			// A token naming a kid the cache does not know makes it refetch
			// the set, as the background refresh would.
			probe := signClaims(hdr("RS256", "new", nil), claims(), k.rotated)
			_, _ = f.v.Verify(ctx, probe)
			if _, err := f.v.Verify(ctx, tok); reason.Of(err, reason.OK) != tt.want {
				t.Fatalf("cached token after the key set changed: %v, want %s", err, tt.want)
			}
		})
	}
}
