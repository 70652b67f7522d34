package engine_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/internal/testkit/natstest"
)

// BenchmarkAuthorize measures a whole decision on a cached RS256 token:
// token cache hit, input built from claims, rate limit, default policy.
func BenchmarkAuthorize(b *testing.B) {
	p := idptest.New(b)
	benchAuthorize(b, p, prodConfig(p.JWKSURL()), false)
}

// benchAuthorize measures Authorize of orders:read on a cached token of
// p on an engine of cfg, after one allowed warm-up decision. With
// allowed, every decision must be allowed; else only errors fail.
func benchAuthorize(b *testing.B, p *idptest.IdP, cfg config.Config, allowed bool) {
	e := newEngine(b, cfg, engine.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tok := p.Token(b, claimsFor("acme", "viewer"))
	ctx := context.Background()
	in := engine.Input{Action: "orders:read"}
	if res, err := e.Authorize(ctx, tok, in); err != nil || !res.Allowed() {
		b.Fatalf("warm-up decision: %+v %v", res.Decision, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := e.Authorize(ctx, tok, in)
		if err != nil || allowed && !res.Allowed() {
			b.Fatalf("decision: %+v %v", res.Decision, err)
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
	benchAuthorize(b, p, cfg, true)
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

// BenchmarkAuthorizeDecisionLog is a whole decision as Envoy asks for it
// (a request with the headers a proxy passes) without and with the
// decision log shipping to NATS JetStream: the record built, redacted,
// spooled before the answer, and shipped by the same process. cpu-ns/op
// is the process's CPU per decision, which the NATS server on the same
// cores does not inflate as it does the wall time; p50-ns and p99-ns are
// the latencies of single decisions.
func BenchmarkAuthorizeDecisionLog(b *testing.B) {
	p := idptest.New(b)
	srv := natstest.Start(b)
	tok := p.Token(b, claimsFor("acme", "viewer"))
	headers := map[string]string{
		":authority": "orders.example.com", ":method": "GET", ":path": "/orders/o-1?expand=items",
		"accept": "application/json", "user-agent": "curl/8.5.0", "x-request-id": "0c7c1ec5-6f5e-4b1e-9d0a-2f3b8e0d1a11",
		"traceparent": "00-5b8aa5a2d2c872e8321cf37308d69df2-051581bf3cb55c13-01", "x-forwarded-for": "10.0.0.7",
		"x-forwarded-proto": "https", "cookie": "session=abc", "authorization": "Bearer " + tok,
	}
	// The HTTP sink's service reads and discards the uploads, in this
	// process: its CPU is counted, a little of it.
	logs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(logs.Close)
	for _, sink := range []string{"off", "nats", "http"} {
		b.Run(sink, func(b *testing.B) {
			cfg := prodConfig(p.JWKSURL())
			switch sink {
			case "nats":
				cfg = decisionLogConfig(b, p, srv.URL())
			case "http":
				cfg = decisionLogConfig(b, p, logs.URL)
				cfg.DecisionLog.Sink = config.DecisionLogHTTP
			}
			cfg.RateLimit.DefaultRPM = 1 << 40
			e := newEngine(b, cfg, engine.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			ctx := context.Background()
			decide := func() {
				req := policy.Request{Method: "GET", Path: "/orders/o-1", Host: "orders.example.com",
					Headers: headers, Query: map[string]string{"expand": "items"}}
				res, err := e.Decide(ctx, engine.Request{Credential: engine.BearerToken(tok), Source: "envoy",
					Input: engine.Input{Action: "orders:read", Resource: policy.Resource{Type: "orders", ID: "o-1"}, Request: &req}})
				if err != nil || !res.Allowed() {
					b.Fatalf("decision: %+v %v", res.Decision, err)
				}
			}
			decide()
			b.ReportAllocs()
			lat := make([]time.Duration, 0, 1<<20)
			cpu0 := testkit.ProcessCPU(b, 0)
			for b.Loop() {
				t0 := time.Now()
				decide()
				if len(lat) < cap(lat) {
					lat = append(lat, time.Since(t0))
				}
			}
			// The process's CPU, the shipper's included; the NATS
			// server's, on the same cores, is not.
			b.ReportMetric(float64((testkit.ProcessCPU(b, 0)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}
