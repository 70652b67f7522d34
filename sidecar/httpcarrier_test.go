package sidecar

import (
	"bufio"
	"context"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
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

// TestFrontCarrierAsHeaderCarrier: the front's carrier gives the
// propagators what headerCarrier gives them of the same request read by
// net/http, repeated fields included (the first traceparent and
// tracestate, each baggage value apart, so that a malformed one drops
// only its own members), and the span's user agent is the first, as
// http.Request.UserAgent.
func TestFrontCarrierAsHeaderCarrier(t *testing.T) {
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	const other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for name, lines := range map[string][]string{
		"single":                 {"Traceparent: " + traceparent, "Tracestate: a=1", "Baggage: k=v", "User-Agent: nginx"},
		"repeated":               {"Traceparent: " + traceparent, "Traceparent: " + other, "Tracestate: a=1", "Tracestate: b=2", "Baggage: k=v", "Baggage: k2=v2", "User-Agent: nginx", "User-Agent: curl"},
		"malformed baggage":      {"Traceparent: " + traceparent, "Baggage: k=v", "Baggage: bad;;=", "Baggage: k2=v2"},
		"empty first":            {"Traceparent: " + traceparent, "Tracestate:", "Tracestate: b=2", "User-Agent:", "User-Agent: curl"},
		"mixed case names":       {"traceparent: " + traceparent, "TRACESTATE: a=1", "baggage: k=v", "BAGGAGE: k2=v2", "user-agent: x"},
		"malformed first parent": {"Traceparent: 00-zz", "Traceparent: " + traceparent},
	} {
		t.Run(name, func(t *testing.T) {
			raw := "GET /check HTTP/1.1\r\nHost: svc\r\n" + strings.Join(lines, "\r\n") + "\r\n\r\n"
			fc, _, fast := frontRead([]byte(raw))
			if !fast {
				t.Fatalf("the front does not read %q", raw)
			}
			req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
			if err != nil {
				t.Fatal(err)
			}
			got, want := frontCarrier{&fc.req}, headerCarrier(req.Header)
			for _, f := range []string{"traceparent", "tracestate", "baggage"} {
				if g, w := got.Get(f), want.Get(f); g != w {
					t.Errorf("Get(%q) = %q, want %q", f, g, w)
				}
			}
			// Only the baggage propagator reads every value.
			if g, w := got.Values("baggage"), want.Values("baggage"); !slices.Equal(g, w) {
				t.Errorf("Values(baggage) = %q, want %q", g, w)
			}
			gctx := prop.Extract(context.Background(), got)
			wctx := prop.Extract(context.Background(), want)
			if g, w := trace.SpanContextFromContext(gctx), trace.SpanContextFromContext(wctx); !g.Equal(w) || g.TraceState().String() != w.TraceState().String() {
				t.Errorf("span context %v (state %q), want %v (state %q)", g, g.TraceState(), w, w.TraceState())
			}
			gb, wb := baggage.FromContext(gctx), baggage.FromContext(wctx)
			if gb.Len() != wb.Len() {
				t.Errorf("baggage %q, want %q", gb, wb)
			}
			for _, m := range wb.Members() {
				if gb.Member(m.Key()).Value() != m.Value() {
					t.Errorf("baggage %q, want %q", gb, wb)
				}
			}
			if ua, _ := fc.req.First("user-agent"); ua != req.UserAgent() {
				t.Errorf("user agent %q, want %q", ua, req.UserAgent())
			}
		})
	}
}
