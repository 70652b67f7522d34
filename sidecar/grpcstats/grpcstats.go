// Package grpcstats is the telemetry of the sidecar's gRPC server:
// interceptors that give every call a server span, continuing the
// caller's trace from the call's metadata, and record the call's
// duration in the rpc.server.call.duration histogram, and a counter of
// the requests whose message did not decode, which gRPC answers before
// any interceptor.
//
// It records what otelgrpc's server handler (v0.72, default semantic
// conventions) recorded: the span's name, kind, attributes and status,
// and the histogram's name, unit, buckets and attributes (the older
// conventions otelgrpc could be switched to with
// OTEL_SEMCONV_STABILITY_OPT_IN=rpc/old or rpc/dup are not offered).
// Being an interceptor, it sees a call from its decoded request to its
// handler's answer: the span and the duration leave out reading and
// decoding the request and writing the answer, which otelgrpc's stats
// handler counted, and a call that never reaches its handler (an unknown
// method, as before; a request that does not decode, now counted by
// MetricUndecodable) has neither.
//
// What it does not do is pay for that on calls nobody looks at. The sampler still
// decides, through the configured TracerProvider, whether a call's span
// is recorded; an unsampled call then costs what the SDK needs to carry
// its non-recording span to the decision's child spans, and nothing else:
// no attribute is built, no per-call state is kept in the context, and
// the duration is recorded with an attribute set built once per method
// and status code (in the provider's otelhist.Registry when it offers
// one: a few atomic operations). Installed with ServerOptions, a tap
// handle finds the caller's trace headers with exact lookups in the
// headers as the transport decoded them, before the interceptors.
package grpcstats

import (
	"context"
	"net"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/svc-dev/svc/internal/otelhist"
)

// ScopeName is the instrumentation scope of the handler's tracer and meter.
const ScopeName = "github.com/svc-dev/svc/sidecar/grpcstats"

// MetricCallDuration is the histogram of server call durations, in
// seconds (semantic conventions v1.43, as otelgrpc records it).
const MetricCallDuration = "rpc.server.call.duration"

const callDurationDesc = "Measures the duration of an incoming Remote Procedure Call (RPC)."

// callDurationBuckets are otelgrpc's bucket boundaries of the histogram.
var callDurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// MetricUndecodable counts the requests whose message did not decode
// (Prometheus: svc_grpc_undecodable_requests_total), by the message's
// type (attribute message).
const MetricUndecodable = "svc.grpc.undecodable_requests"

// Options are what a Handler records with. Every field is required.
type Options struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Propagator extracts the caller's trace context from the incoming
	// metadata.
	Propagator propagation.TextMapPropagator
}

// Handler serves the telemetry of a gRPC server's calls from a unary and
// a stream interceptor (Unary, Stream), which the server runs first, and
// counts the requests gRPC refused before any interceptor because their
// body did not decode (CountUndecodable). It is safe for concurrent use.
//
// It is not a stats.Handler: with one installed, gRPC copies every
// call's incoming metadata, builds its peer twice and allocates an event
// for each of the call's steps, whether or not anything is recorded.
type Handler struct {
	tracer trace.Tracer
	// start holds the span start options, made once: an option made per
	// call is an allocation on every call.
	start   []trace.SpanStartOption
	extract extractor
	// duration is rpc.server.call.duration: in hist, a histogram of the
	// provider's otelhist.Registry, when it has one (the methods' series
	// are then in methods); else the SDK's instrument.
	duration    metric.Float64Histogram
	hist        *otelhist.Histogram
	undecodable metric.Int64Counter
	methods     methodTable
}

// New returns a Handler recording with opts' providers.
func New(opts Options) (*Handler, error) {
	m := opts.MeterProvider.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	h := &Handler{
		tracer:  opts.TracerProvider.Tracer(ScopeName),
		start:   []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)},
		extract: newExtractor(opts.Propagator),
	}
	// The duration is recorded on every call: in the provider's
	// otelhist.Registry when it has one, exported as the SDK's
	// instrument would be, for a fraction of its cost.
	if reg := otelhist.From(opts.MeterProvider); reg != nil {
		h.hist = reg.Histogram(otelhist.Scope{Name: ScopeName, SchemaURL: semconv.SchemaURL},
			MetricCallDuration, callDurationDesc, "s", callDurationBuckets)
		h.methods.hist = h.hist
	} else {
		var err error
		if h.duration, err = m.Float64Histogram(MetricCallDuration,
			metric.WithDescription(callDurationDesc),
			metric.WithUnit("s"),
			metric.WithExplicitBucketBoundaries(callDurationBuckets...)); err != nil {
			return nil, err
		}
	}
	var err error
	if h.undecodable, err = m.Int64Counter(MetricUndecodable,
		metric.WithDescription("gRPC requests answered INTERNAL before their handler because their message did not decode.")); err != nil {
		return nil, err
	}
	return h, nil
}

// begin starts the call's server span, under the caller's span when the
// metadata carries one. The span is described only when the sampler
// chose to record it.
//
// With tapped, the Handler's tap (ServerOptions) saw the call's headers
// first: the caller's context is extracted only when it found a key of
// the propagator there.
func (h *Handler) begin(ctx context.Context, fullMethod string, tapped bool) (context.Context, trace.Span) {
	if !tapped {
		ctx = h.extract.extract(ctx)
	} else if h.extract.tapped(ctx) {
		ctx = h.extract.prop.Extract(ctx, mdCarrier{ctx})
	}
	ctx, span := h.tracer.Start(ctx, spanName(fullMethod), h.start...)
	if span.IsRecording() {
		if ms := h.methods.lookup(fullMethod); ms != nil {
			span.SetAttributes(ms.span...)
		} else {
			span.SetAttributes(methodAttrs(fullMethod)...)
		}
		// The connection's peer is in the context of every call.
		if p, ok := peer.FromContext(ctx); ok && p.LocalAddr != nil {
			span.SetAttributes(serverAddrAttrs(p.LocalAddr.String())...)
		}
	}
	return ctx, span
}

// end ends the call's span with its status and records its duration
// since began. st is nil for a call answered OK.
func (h *Handler) end(ctx context.Context, span trace.Span, fullMethod string, began time.Time, st *status.Status) {
	code := grpccodes.OK
	if st != nil {
		code = st.Code()
	}
	if span.IsRecording() {
		if st != nil {
			span.SetStatus(spanStatus(st))
		}
		span.SetAttributes(semconv.RPCResponseStatusCode(canonicalString(code)))
		span.End()
	}
	if h.hist != nil {
		elapsed := float64(time.Since(began)) / float64(time.Second)
		if ms := h.methods.get(fullMethod); ms != nil && int(code) < len(ms.series) {
			ms.series[code].Record(ctx, elapsed)
			return
		}
		h.hist.Bind(durationAttrs(fullMethod, code)).Record(ctx, elapsed)
		return
	}
	if !h.duration.Enabled(ctx) {
		return
	}
	elapsed := float64(time.Since(began)) / float64(time.Second)
	if ms := h.methods.get(fullMethod); ms != nil && int(code) < len(ms.byCode) {
		h.duration.Record(ctx, elapsed, ms.byCode[code]...)
		return
	}
	h.duration.Record(ctx, elapsed, recordOptions(fullMethod, code)...)
}

// spanName is the span name of a call: the full method without its
// leading slash, "package.Service/Method".
func spanName(fullMethod string) string {
	if len(fullMethod) > 0 && fullMethod[0] == '/' {
		return fullMethod[1:]
	}
	return fullMethod
}

// isServerError reports the codes that mean the server failed, which set
// the span's status to Error and the metric's error.type; the others
// (a refused argument, a missing permission) are the caller's.
func isServerError(c grpccodes.Code) bool {
	switch c {
	case grpccodes.Unknown, grpccodes.DeadlineExceeded, grpccodes.Unimplemented,
		grpccodes.Internal, grpccodes.Unavailable, grpccodes.DataLoss:
		return true
	}
	return false
}

func spanStatus(st *status.Status) (codes.Code, string) {
	if isServerError(st.Code()) {
		return codes.Error, st.Message()
	}
	return codes.Unset, ""
}

// serverAddrAttrs are server.address and server.port of a local address
// "host:port"; only server.address when it does not split so.
func serverAddrAttrs(hostport string) []attribute.KeyValue {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return []attribute.KeyValue{semconv.ServerAddress(hostport)}
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return []attribute.KeyValue{semconv.ServerAddress(h)}
	}
	return []attribute.KeyValue{semconv.ServerAddress(h), semconv.ServerPort(port)}
}
