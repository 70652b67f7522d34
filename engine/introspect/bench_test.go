package introspect_test

import (
	"context"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/introspect"
)

// BenchmarkIntrospectCacheHit is an opaque token answered from the
// in-process cache: a SHA-256 of the token and one shard's lookup, no
// call. It must stay under 2 µs.
func BenchmarkIntrospectCacheHit(b *testing.B) {
	const tok = "2YotnFZFEjr1zCsicMWpAA-opaque-access-token-43chars"
	ep := newEndpoint(b, map[string]string{tok: `{"active":true,"sub":"alice","tenant_id":"acme","roles":["viewer"],"scope":"orders:read"}`})
	c, err := introspect.New(introspect.Options{URL: ep.srv.URL, ClientID: clientID, ClientSecret: clientSecret, CacheTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Introspect(ctx, tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Introspect(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	if n := ep.calls.Load(); n != 1 {
		b.Fatalf("%d calls to the endpoint, want 1", n)
	}
}
