package engine_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/internal/idptest"
	"github.com/svc-dev/svc/internal/testkit"
)

// BenchmarkAuthorize measures a whole decision on a cached RS256 token:
// token cache hit, input built from claims, rate limit, default policy.
func BenchmarkAuthorize(b *testing.B) {
	p := idptest.New(b)
	e := newEngine(b, prodConfig(p.JWKSURL()), engine.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tok := p.Token(b, claimsFor("acme", "viewer"))
	ctx := context.Background()
	in := engine.Input{Action: "orders:read"}
	if res, err := e.Authorize(ctx, tok, in); err != nil || !res.Allowed() {
		b.Fatalf("warm-up decision: %+v %v", res.Decision, err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Authorize(ctx, tok, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateToken measures the engine's ValidateToken on a cached
// RS256 token: token cache hit, tenant check, the tenant's rate limit.
func BenchmarkValidateToken(b *testing.B) {
	p := idptest.New(b)
	cfg := prodConfig(p.JWKSURL())
	cfg.RateLimit.DefaultRPM = 1 << 40 // counted, never refused
	e := newEngine(b, cfg, engine.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tok := p.Token(b, claimsFor("acme", "viewer"))
	ctx := context.Background()
	if d := e.ValidateToken(ctx, tok); !d.Allowed {
		b.Fatalf("warm-up: %+v", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		if d := e.ValidateToken(ctx, tok); !d.Allowed {
			b.Fatalf("refused: %+v", d)
		}
	}
}

// BenchmarkAuthorizeAllowed is BenchmarkAuthorize with a budget that is
// counted but never spent, so that every decision reaches the policy:
// token cache hit, input built from claims, rate limit, decision cache
// hit of the default policy.
func BenchmarkAuthorizeAllowed(b *testing.B) {
	p := idptest.New(b)
	cfg := prodConfig(p.JWKSURL())
	cfg.RateLimit.DefaultRPM = 1 << 40
	e := newEngine(b, cfg, engine.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tok := p.Token(b, claimsFor("acme", "viewer"))
	ctx := context.Background()
	in := engine.Input{Action: "orders:read"}
	if res, err := e.Authorize(ctx, tok, in); err != nil || !res.Allowed() {
		b.Fatalf("warm-up decision: %+v %v", res.Decision, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := e.Authorize(ctx, tok, in); err != nil || !res.Allowed() {
			b.Fatalf("decision: %+v %v", res.Decision, err)
		}
	}
}

// BenchmarkValidateTokenSAML is BenchmarkValidateToken on an engine with
// [sdk.saml] configured, so that two verifiers stand before the JWKS: a
// cached token of the IdP (idp) and a cached token of the SAML gateway
// (local).
func BenchmarkValidateTokenSAML(b *testing.B) {
	p := idptest.New(b)
	cfg := withSAML(prodConfig(p.JWKSURL()), testkit.TokenKeyFile(b))
	cfg.RateLimit.DefaultRPM = 1 << 40 // counted, never refused
	e := newEngine(b, cfg, engine.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	local, _, err := e.Issuer().Issue(map[string]any{"sub": "alice", "tenant_id": "acme", "roles": []string{"viewer"}})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, tok string }{
		{"idp", p.Token(b, claimsFor("acme", "viewer"))},
		{"local", local},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			if d := e.ValidateToken(ctx, bc.tok); !d.Allowed {
				b.Fatalf("warm-up: %+v", d)
			}
			b.ReportAllocs()
			for b.Loop() {
				if d := e.ValidateToken(ctx, bc.tok); !d.Allowed {
					b.Fatalf("refused: %+v", d)
				}
			}
		})
	}
}
