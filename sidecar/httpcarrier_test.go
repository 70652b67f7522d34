package sidecar

import (
	"context"
	"net/http"
	"net/textproto"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TestHeaderCarrierAsHeaderCarrier checks headerCarrier, which knows the
// canonical keys of the W3C fields, against propagation.HeaderCarrier.
func TestHeaderCarrierAsHeaderCarrier(t *testing.T) {
	headers := map[string]http.Header{
		"none":      {},
		"w3c":       {"Traceparent": {traceparent}, "Tracestate": {"a=1,b=2"}, "Baggage": {"k=v", "k2=v2"}},
		"empty":     {"Traceparent": {}, "Baggage": {""}},
		"other":     {"X-B3-Traceid": {"abc"}, "Uber-Trace-Id": {"x:y:z:1"}},
		"lowercase": {"traceparent": {traceparent}}, // not canonical: neither finds it
	}
	fields := []string{"traceparent", "tracestate", "baggage", "x-b3-traceid", "uber-trace-id", "Traceparent", "BAGGAGE", ""}
	for name, h := range headers {
		want, got := propagation.HeaderCarrier(h), headerCarrier(h)
		for _, f := range fields {
			if g, w := got.Get(f), want.Get(f); g != w {
				t.Errorf("%s: Get(%q) = %q, want %q", name, f, g, w)
			}
			if g, w := got.Values(f), want.Values(f); !slices.Equal(g, w) {
				t.Errorf("%s: Values(%q) = %q, want %q", name, f, g, w)
			}
		}
		if g, w := slices.Sorted(slices.Values(got.Keys())), slices.Sorted(slices.Values(want.Keys())); !slices.Equal(g, w) {
			t.Errorf("%s: Keys() = %q, want %q", name, g, w)
		}
	}
	for _, f := range []string{"traceparent", "tracestate", "baggage"} {
		if got, want := canonicalField(f), textproto.CanonicalMIMEHeaderKey(f); got != want {
			t.Errorf("canonicalField(%q) = %q, want %q", f, got, want)
		}
	}
}

// TestHeaderCarrierExtract: the sidecar's propagator takes the same trace
// context and baggage through either carrier.
func TestHeaderCarrierExtract(t *testing.T) {
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	h := http.Header{"Traceparent": {traceparent}, "Tracestate": {"a=1"}, "Baggage": {"k=v", "k2=v2"}}
	want := prop.Extract(context.Background(), propagation.HeaderCarrier(h))
	got := prop.Extract(context.Background(), headerCarrier(h))
	if g, w := trace.SpanContextFromContext(got), trace.SpanContextFromContext(want); !g.Equal(w) || !g.IsValid() {
		t.Errorf("span context %v, want %v", g, w)
	}
	gb, wb := baggage.FromContext(got), baggage.FromContext(want)
	if gb.Len() != 2 || gb.Len() != wb.Len() || gb.Member("k").Value() != wb.Member("k").Value() || gb.Member("k2").Value() != wb.Member("k2").Value() {
		t.Errorf("baggage %q, want %q", gb, wb)
	}
	// Set writes as HeaderCarrier does.
	a, b := http.Header{}, http.Header{}
	prop.Inject(got, propagation.HeaderCarrier(a))
	prop.Inject(got, headerCarrier(b))
	if a.Get("Traceparent") != b.Get("Traceparent") || len(a) != len(b) {
		t.Errorf("Inject: %v, want %v", b, a)
	}
	// Baggage lists its members in map order: compare them as a set.
	ab, errA := baggage.Parse(a.Get("Baggage"))
	bb, errB := baggage.Parse(b.Get("Baggage"))
	if errA != nil || errB != nil || ab.Len() != 2 || ab.Len() != bb.Len() ||
		ab.Member("k").Value() != bb.Member("k").Value() || ab.Member("k2").Value() != bb.Member("k2").Value() {
		t.Errorf("Inject baggage %q (%v), want %q (%v)", b.Get("Baggage"), errB, a.Get("Baggage"), errA)
	}
}
