package grpcstats

import (
	"context"
	"net"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"

	"github.com/svc-dev/svc/internal/testkit"
)

// fakeStream names the method of a call, as the server's stream does in
// the context of the call's End event.
type fakeStream struct{ method string }

func (s fakeStream) Method() string             { return s.method }
func (fakeStream) SetHeader(metadata.MD) error  { return nil }
func (fakeStream) SendHeader(metadata.MD) error { return nil }
func (fakeStream) SetTrailer(metadata.MD) error { return nil }

// envoyMetadata is the metadata of an ext_authz Check from Envoy without
// tracing.
func envoyMetadata() metadata.MD {
	return metadata.Pairs(":authority", "svc-sidecar", "content-type", "application/grpc",
		"user-agent", "envoy/1.33 grpc-go/1.85", "x-envoy-internal", "true",
		"x-envoy-expected-rq-timeout-ms", "200", "x-request-id", "5f1c8a34-3c7a-4d1e-9a83-0c8e2f1b7d42")
}

// callEvents feeds h the events of one unary call the way the server
// does.
func callEvents(h stats.Handler, base context.Context, method string, local net.Addr) {
	ctx := h.TagRPC(base, &stats.RPCTagInfo{FullMethodName: method})
	now := time.Now()
	h.HandleRPC(ctx, &stats.InHeader{FullMethod: method, LocalAddr: local})
	begin := &stats.Begin{BeginTime: now}
	h.HandleRPC(ctx, begin)
	ctx = grpc.NewContextWithServerTransportStream(ctx, fakeStream{method})
	h.HandleRPC(ctx, &stats.InPayload{})
	h.HandleRPC(ctx, &stats.OutHeader{})
	h.HandleRPC(ctx, &stats.OutPayload{})
	h.HandleRPC(ctx, &stats.OutTrailer{})
	h.HandleRPC(ctx, &stats.End{BeginTime: now, EndTime: now.Add(time.Millisecond)})
}

// TestUnsampledCallAllocs: a call whose span the sampler drops costs the
// SDK's non-recording span and its context and nothing more, metrics
// included.
func TestUnsampledCallAllocs(t *testing.T) {
	if testkit.RaceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	h, err := New(Options{TracerProvider: tp, MeterProvider: mp, Propagator: prop})
	if err != nil {
		t.Fatal(err)
	}
	// The SDK's Start of a dropped span: the span and the context
	// carrying it to the decision's spans.
	sdkStart := testing.AllocsPerRun(100, func() {
		_, span := tp.Tracer("t").Start(context.Background(), "s")
		span.End()
	})
	base := metadata.NewIncomingContext(context.Background(), envoyMetadata())
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7701}
	const method = "/envoy.service.auth.v3.Authorization/Check"
	callEvents(h, base, method, local) // the method's attribute sets are built once
	got := testing.AllocsPerRun(200, func() { callEvents(h, base, method, local) })
	// callEvents itself allocates the events (as the server does) and
	// the stream's context.
	events := testing.AllocsPerRun(200, func() { callEvents(nopHandler{}, base, method, local) })
	if handler := got - events; handler > sdkStart {
		t.Errorf("an unsampled call allocates %.0f times in the handler, want at most the SDK's %.0f for a dropped span", handler, sdkStart)
	}
	t.Logf("handler %.0f allocations (SDK start %.0f)", got-events, sdkStart)
}

type nopHandler struct{}

func (nopHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (nopHandler) HandleRPC(context.Context, stats.RPCStats)                         {}
func (nopHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (nopHandler) HandleConn(context.Context, stats.ConnStats)                       {}

// BenchmarkUnsampledCall measures the handler on the events of a call
// whose span the sampler drops (the events' own cost included).
func BenchmarkUnsampledCall(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	h, err := New(Options{TracerProvider: tp, MeterProvider: mp, Propagator: prop})
	if err != nil {
		b.Fatal(err)
	}
	base := metadata.NewIncomingContext(context.Background(), envoyMetadata())
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7701}
	b.ReportAllocs()
	for b.Loop() {
		callEvents(h, base, "/envoy.service.auth.v3.Authorization/Check", local)
	}
}
