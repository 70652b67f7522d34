package grpcstats

import (
	"context"
	"net"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/svc-dev/svc/internal/testkit"
)

// envoyMetadata is the metadata of an ext_authz Check from Envoy without
// tracing.
func envoyMetadata() metadata.MD {
	return metadata.Pairs(":authority", "svc-sidecar", "content-type", "application/grpc",
		"user-agent", "envoy/1.33 grpc-go/1.85", "x-envoy-internal", "true",
		"x-envoy-expected-rq-timeout-ms", "200", "x-request-id", "5f1c8a34-3c7a-4d1e-9a83-0c8e2f1b7d42")
}

// droppedSpanAllocs is what the SDK's Start of a span the sampler drops
// allocates: the span and the context carrying it to the decision's
// spans.
func droppedSpanAllocs(tp *sdktrace.TracerProvider) float64 {
	return testing.AllocsPerRun(100, func() {
		_, span := tp.Tracer("t").Start(context.Background(), "s")
		span.End()
	})
}

// callMetadata is the incoming metadata of the calls the extraction tests
// compare: with and without trace context and baggage, malformed,
// repeated or with upper-case keys.
func callMetadata() map[string]metadata.MD {
	const tp = "00-" + callerTrace + "-" + callerSpan + "-01"
	return map[string]metadata.MD{
		"none":              nil,
		"envoy":             envoyMetadata(),
		"traceparent":       metadata.Pairs("traceparent", tp),
		"unsampled":         metadata.Pairs("traceparent", "00-"+callerTrace+"-"+callerSpan+"-00"),
		"malformed":         metadata.Pairs("traceparent", "00-zz"),
		"empty value":       metadata.Pairs("traceparent", ""),
		"tracestate only":   metadata.Pairs("tracestate", "vendor=x"),
		"with tracestate":   metadata.Pairs("traceparent", tp, "tracestate", "vendor=x"),
		"baggage":           metadata.Pairs("baggage", "tenant=acme"),
		"repeated":          metadata.Pairs("traceparent", tp, "traceparent", "00-zz"),
		"with envoy extras": metadata.Join(envoyMetadata(), metadata.Pairs("traceparent", tp, "baggage", "a=b")),
		"upper case key":    {"Traceparent": {tp}, "BAGGAGE": {"a=b"}},
		"lister key":        metadata.Pairs("x-lister", "1"),
	}
}

// unsampledHandler is a Handler whose sampler drops every span without a
// sampled parent, with a metric reader.
func unsampledHandler(tb testing.TB) (*Handler, *sdktrace.TracerProvider) {
	tb.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	h, err := New(Options{TracerProvider: tp, MeterProvider: mp, Propagator: prop})
	if err != nil {
		tb.Fatal(err)
	}
	return h, tp
}

// checkCall is the context of an ext_authz Check as the server hands it
// to the interceptor (the connection's peer, the call's metadata), its
// info and a handler that answers without work.
func checkCall() (context.Context, *grpc.UnaryServerInfo, grpc.UnaryHandler) {
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7701}
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: remote, LocalAddr: local})
	ctx = metadata.NewIncomingContext(ctx, envoyMetadata())
	info := &grpc.UnaryServerInfo{FullMethod: "/envoy.service.auth.v3.Authorization/Check"}
	answer := new(int)
	return ctx, info, func(context.Context, any) (any, error) { return answer, nil }
}

// TestUnsampledCallAllocs: a unary call whose span the sampler drops
// costs the interceptor the SDK's non-recording span and its context and
// nothing more, metrics included.
func TestUnsampledCallAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	h, tp := unsampledHandler(t)
	sdkStart := droppedSpanAllocs(tp)
	ctx, info, handler := checkCall()
	_, _ = h.Unary(ctx, nil, info, handler) // the method's attribute sets are built once
	got := testing.AllocsPerRun(200, func() { _, _ = h.Unary(ctx, nil, info, handler) })
	if got > sdkStart {
		t.Errorf("an unsampled call allocates %.0f times in the interceptor, want at most the SDK's %.0f for a dropped span", got, sdkStart)
	}
	t.Logf("interceptor %.0f allocations (SDK start %.0f)", got, sdkStart)
}

// BenchmarkUnsampledCall measures the unary interceptor on a call whose
// span the sampler drops.
func BenchmarkUnsampledCall(b *testing.B) {
	h, _ := unsampledHandler(b)
	ctx, info, handler := checkCall()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = h.Unary(ctx, nil, info, handler)
	}
}
