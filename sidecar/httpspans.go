package sidecar

import (
	"net/http"
	"net/textproto"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/envoy"
)

// traceDecisions gives every decision request of the HTTP listener a
// server span, the parent of the engine's auth.verify_token and
// policy.evaluate spans, as the grpcstats handler's span is on the gRPC
// listener. The span continues the caller's trace when the request
// carries a W3C traceparent (nginx, Caddy, an SDK). Its name is the
// method and route, e.g. "POST /v1/authorize" or "GET /check".
//
// Only decision paths get one: the local API's authorize and
// validate-token, and the check mode's /check and /check/envoy/…. Probes,
// metrics scrapes, admin calls and the long-lived streams do not, so
// trace tail shows decisions and nothing else.
//
// While no span can be recorded (no OTLP endpoint and nobody tailing
// traces, the default) the span is not described at all: the request
// only takes the caller's trace context, so that the decision's logs and
// audit record still name the caller's trace. The span has no metrics of
// its own: the engine's decision metrics count these requests, and HTTP
// metrics that existed only while somebody watched would mislead.
func (s *Server) traceDecisions(next http.Handler) http.Handler {
	t := s.deps.Telemetry
	if t == nil {
		return next
	}
	prop := t.Propagator()
	traced := otelhttp.NewHandler(next, "svc-sidecar",
		otelhttp.WithTracerProvider(t.TracerProvider()),
		otelhttp.WithMeterProvider(noop.NewMeterProvider()),
		otelhttp.WithPropagators(prop),
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !isDecisionRequest(r):
			next.ServeHTTP(w, r)
		case t.SpansRecorded():
			traced.ServeHTTP(w, r)
		default:
			ctx := r.Context()
			if ext := prop.Extract(ctx, headerCarrier(r.Header)); ext != ctx {
				r = r.WithContext(ext)
			}
			next.ServeHTTP(w, r)
		}
	})
}

// isDecisionRequest reports a request of a path that reaches a decision.
func isDecisionRequest(r *http.Request) bool {
	switch p := r.URL.Path; p {
	case authz.PathAuthorize, authz.PathValidateToken, authz.PathPlanResources, envoy.CheckPath:
		return true
	default:
		return strings.HasPrefix(p, envoy.EnvoyCheckPrefix+"/")
	}
}

// headerCarrier is propagation.HeaderCarrier, but finds the W3C fields
// (traceparent, tracestate, baggage) by their canonical keys without
// computing them: http.Header.Get canonicalizes the lower-case field
// names propagators use, allocating on every request that is not traced.
type headerCarrier http.Header

var _ propagation.ValuesGetter = headerCarrier{}

// canonicalField is textproto.CanonicalMIMEHeaderKey(field).
func canonicalField(field string) string {
	switch field {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	case "baggage":
		return "Baggage"
	}
	return textproto.CanonicalMIMEHeaderKey(field)
}

// Get returns the first value of field, as http.Header.Get.
func (c headerCarrier) Get(field string) string {
	if vs := c[canonicalField(field)]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// Values returns every value of field, as http.Header.Values.
func (c headerCarrier) Values(field string) []string { return c[canonicalField(field)] }

// Set sets field, as http.Header.Set.
func (c headerCarrier) Set(field, value string) { propagation.HeaderCarrier(c).Set(field, value) }

// Keys lists the keys of the header, as propagation.HeaderCarrier.Keys.
func (c headerCarrier) Keys() []string { return propagation.HeaderCarrier(c).Keys() }
