package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
)

// TestAuditedDecisionAllocs guards the allocations of an allowed decision
// under a span, audited to a log, token and decision both cached: the
// trace ids reach the log as bytes, not as strings.
func TestAuditedDecisionAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	p := idptest.New(t)
	var cfg config.Config
	cfg.SDK.TenantID = "acme"
	cfg.SDK.JWKSURL = p.JWKSURL()
	cfg.SDK.FailMode = config.FailClosed
	cfg.RateLimit.Disabled = true
	lg := audit.New(io.Discard, audit.Options{})
	t.Cleanup(func() { _ = lg.Close(context.Background()) })
	e, err := New(cfg, Deps{Audit: lg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		Remote:  true,
	}))
	tok := p.Token(t, idptest.Claims("user-1", "acme", "viewer"))
	in := Input{Action: "orders:read"}
	decide := func() {
		res, err := e.Decide(ctx, Request{Credential: BearerToken(tok), Input: in, Source: "envoy"})
		if err != nil || !res.Allowed() {
			t.Fatalf("decision not allowed: %v %v", res.Decision.Reason, err)
		}
	}
	decide()
	// The decision id is the one allocation left.
	if n := testing.AllocsPerRun(200, decide); n > 1 {
		t.Errorf("audited decision: %v allocations, want at most 1", n)
	}
}
