package sidecar

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func newTestDecisionSpans(sampler sdktrace.Sampler) (*decisionSpans, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(rec))
	return &decisionSpans{
		tracer: tp.Tracer(httpScopeName),
		start:  []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)},
	}, rec
}

// TestDecisionSpanAttributes: a recorded span has the name, kind,
// attributes and status otelhttp (v0.72) gave it, and http.route.
func TestDecisionSpanAttributes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/authorize", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"allow":true}`))
	})
	mux.HandleFunc("GET /check", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	cases := []struct {
		name, method, target, host, body, proto string
		header                                  http.Header
		span                                    string
		status                                  codes.Code
		want                                    map[attribute.Key]attribute.Value
	}{
		{"authorize", http.MethodPost, "/v1/authorize", "sidecar:8181", `{"action":"a"}`, "HTTP/1.1",
			http.Header{"User-Agent": {"sdk/1"}}, "POST /v1/authorize", codes.Unset,
			map[attribute.Key]attribute.Value{
				"server.address": attribute.StringValue("sidecar"), "server.port": attribute.IntValue(8181),
				"http.request.method": attribute.StringValue("POST"), "url.scheme": attribute.StringValue("http"),
				"network.peer.address": attribute.StringValue("10.0.0.7"), "network.peer.port": attribute.IntValue(40000),
				"user_agent.original": attribute.StringValue("sdk/1"), "client.address": attribute.StringValue("10.0.0.7"),
				"url.path": attribute.StringValue("/v1/authorize"), "network.protocol.version": attribute.StringValue("1.1"),
				"http.route": attribute.StringValue("/v1/authorize"), "http.request.body.size": attribute.IntValue(14),
				"http.response.body.size": attribute.IntValue(14), "http.response.status_code": attribute.IntValue(200),
			}},
		{"check", http.MethodGet, "/check", "auth.local", "", "HTTP/2.0",
			http.Header{"X-Forwarded-For": {"192.0.2.1, 10.0.0.1"}}, "GET /check", codes.Error,
			map[attribute.Key]attribute.Value{
				"server.address":       attribute.StringValue("auth.local"),
				"http.request.method":  attribute.StringValue("GET"),
				"url.scheme":           attribute.StringValue("http"),
				"network.peer.address": attribute.StringValue("10.0.0.7"), "network.peer.port": attribute.IntValue(40000),
				"client.address": attribute.StringValue("192.0.2.1"), "url.path": attribute.StringValue("/check"),
				"network.protocol.version": attribute.StringValue("2.0"), "http.route": attribute.StringValue("/check"),
				"http.response.status_code": attribute.IntValue(503),
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, rec := newTestDecisionSpans(sdktrace.AlwaysSample())
			r := httptest.NewRequest(tc.method, tc.target, strings.NewReader(tc.body))
			r.Host, r.RemoteAddr, r.Header = tc.host, "10.0.0.7:40000", tc.header
			r.Proto = tc.proto
			if tc.body == "" {
				r.Body = http.NoBody
			}
			d.serve(context.Background(), httptest.NewRecorder(), r, mux)
			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans ended, want 1", len(spans))
			}
			sp := spans[0]
			if sp.Name() != tc.span || sp.SpanKind() != trace.SpanKindServer || sp.Status().Code != tc.status {
				t.Errorf("span %q kind %v status %v, want %q server %v", sp.Name(), sp.SpanKind(), sp.Status(), tc.span, tc.status)
			}
			got := map[attribute.Key]attribute.Value{}
			for _, kv := range sp.Attributes() {
				got[kv.Key] = kv.Value
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v", k, got[k].String(), v.String())
				}
			}
			for k := range got {
				if _, ok := tc.want[k]; !ok {
					t.Errorf("unexpected attribute %s = %v", k, got[k].String())
				}
			}
		})
	}
}

// TestDecisionSpanUnsampled: a span the sampler drops is not described,
// yet carries the trace to the handler.
func TestDecisionSpanUnsampled(t *testing.T) {
	d, rec := newTestDecisionSpans(sdktrace.NeverSample())
	var inner trace.SpanContext
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner = trace.SpanContextFromContext(r.Context())
	})
	r := httptest.NewRequest(http.MethodGet, "/check", nil)
	w := httptest.NewRecorder()
	d.serve(context.Background(), w, r, h)
	if !inner.IsValid() || inner.IsSampled() {
		t.Errorf("handler's span context = %v, want a valid unsampled one", inner)
	}
	if n := len(rec.Started()); n != 0 {
		t.Errorf("%d spans recorded, want none", n)
	}
	allocs := testing.AllocsPerRun(100, func() { d.serve(context.Background(), w, r, h) })
	// The non-recording span, its context and the request's copy.
	if allocs > 4 {
		t.Errorf("%.0f allocations per unsampled request, want at most 4", allocs)
	}
}

// TestRouteSpanName: "METHOD route", the pattern itself when it reads so.
func TestRouteSpanName(t *testing.T) {
	names := map[[2]string]string{ // method, pattern: name
		{"GET", "GET /check"}:            "GET /check",
		{"POST", "/check"}:               "POST /check",
		{"get", "/check/envoy/"}:         "GET /check/envoy/",
		{"BREW", "/check"}:               "HTTP /check",
		{"GET", "GET example.com/check"}: "GET /check",
	}
	for in, want := range names {
		got := routeSpanName(in[0], in[1], httpRoute(in[1]))
		if got != want {
			t.Errorf("routeSpanName(%q, %q) = %q, want %q", in[0], in[1], got, want)
		}
	}
}
