package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
)

// TestAuditLogTraceIDs: the audit log, given the trace ids as bytes,
// writes those of the request's span, as traceIDs spells them, and none
// without a span.
func TestAuditLogTraceIDs(t *testing.T) {
	p := idptest.New(t)
	cfg := jwksConfig(p)
	var out bytes.Buffer
	lg := audit.New(&out, audit.Options{})
	e, err := New(cfg, Deps{Audit: lg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		Remote:  true,
	})
	traced := trace.ContextWithSpanContext(context.Background(), sc)
	tok := p.Token(t, idptest.Claims("user-1", "acme", "viewer"))
	for _, ctx := range []context.Context{traced, context.Background()} {
		if _, err := e.Authorize(ctx, tok, Input{Action: "orders:read"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Authorize(ctx, "bad", Input{Action: "orders:read"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := lg.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	tid, sid := traceIDs(traced)
	want := []audit.Record{{TraceID: tid, SpanID: sid}, {TraceID: tid, SpanID: sid}, {}, {}}
	dec := json.NewDecoder(&out)
	for i, w := range want {
		var got audit.Record
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if got.TraceID != w.TraceID || got.SpanID != w.SpanID {
			t.Errorf("record %d: trace, span = %q, %q; want %q, %q", i, got.TraceID, got.SpanID, w.TraceID, w.SpanID)
		}
	}
}
