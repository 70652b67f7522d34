package engine

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestTraceIDs: audit records carry the ids of the span a decision was
// made under, as the OpenTelemetry API prints them.
func TestTraceIDs(t *testing.T) {
	valid := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	})
	cases := []struct {
		name          string
		ctx           context.Context
		trace, spanID string
	}{
		{"no span", context.Background(), "", ""},
		{"span", trace.ContextWithSpanContext(context.Background(), valid), "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tid, sid := traceIDs(tc.ctx)
			if tid != tc.trace || sid != tc.spanID {
				t.Errorf("traceIDs = %q, %q; want %q, %q", tid, sid, tc.trace, tc.spanID)
			}
		})
	}
}
