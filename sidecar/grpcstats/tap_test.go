package grpcstats

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/svc-dev/svc/internal/testkit"
)

// observed is what a call's handler saw of the caller's context.
type observedCall struct {
	parent  trace.SpanContext
	traceID trace.TraceID
	baggage string
	code    string
}

// observer is the test service's implementation: it keeps what the last
// call's handler saw.
type observer struct {
	mu   sync.Mutex
	last observedCall
}

var observeDesc = testServiceDesc("Answer", func(ctx context.Context, srv any, _ *healthpb.HealthCheckRequest) (any, error) {
	o := srv.(*observer)
	o.mu.Lock()
	defer o.mu.Unlock()
	span := trace.SpanFromContext(ctx)
	o.last = observedCall{traceID: span.SpanContext().TraceID(), baggage: baggage.FromContext(ctx).String()}
	if ro, ok := span.(sdktrace.ReadOnlySpan); ok {
		o.last.parent = ro.Parent()
	}
	return &healthpb.HealthCheckResponse{}, nil
})

// observedServer serves observeDesc with h installed by ServerOptions
// (tapped) or by its interceptors alone.
func observedServer(t *testing.T, h *Handler, tapped bool) (*grpc.ClientConn, *observer) {
	t.Helper()
	opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(h.Unary), grpc.ChainStreamInterceptor(h.Stream)}
	if tapped {
		opts = h.ServerOptions()
	}
	obs := &observer{}
	conn := testkit.DialGRPC(t, testkit.ServeGRPC(t, func(g *grpc.Server) { g.RegisterService(&observeDesc, obs) }, opts...))
	return conn, obs
}

// TestTapSameAsInterceptor: a server installed with ServerOptions gives
// its handlers the caller's context the interceptors alone give, for
// calls with and without trace context and baggage, malformed, repeated,
// or sent with an upper-case key, under propagators that can and cannot
// be skipped.
func TestTapSameAsInterceptor(t *testing.T) {
	mds := callMetadata()
	props := map[string]propagation.TextMapPropagator{
		"tracecontext+baggage": propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		"lister":               propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, keyLister{}),
	}
	for pn, prop := range props {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
		mp := sdkmetric.NewMeterProvider()
		h, err := New(Options{TracerProvider: tp, MeterProvider: mp, Propagator: prop})
		if err != nil {
			t.Fatal(err)
		}
		plain, plainObs := observedServer(t, h, false)
		tapped, tappedObs := observedServer(t, h, true)
		for mn, md := range mds {
			t.Run(pn+"/"+mn, func(t *testing.T) {
				call := func(conn *grpc.ClientConn, obs *observer) observedCall {
					ctx := context.Background()
					if md != nil {
						md := md.Copy()
						delete(md, ":authority")
						ctx = metadata.NewOutgoingContext(ctx, md)
					}
					obs.mu.Lock()
					obs.last = observedCall{}
					obs.mu.Unlock()
					err := conn.Invoke(ctx, answerMethod, &healthpb.HealthCheckRequest{}, new(healthpb.HealthCheckResponse))
					obs.mu.Lock()
					defer obs.mu.Unlock()
					got := obs.last
					got.code = status.Code(err).String()
					return got
				}
				want, got := call(plain, plainObs), call(tapped, tappedObs)
				if !got.parent.Equal(want.parent) {
					t.Errorf("parent %v, want %v", got.parent, want.parent)
				}
				if got.parent.IsValid() && got.traceID != got.parent.TraceID() {
					t.Errorf("trace %v under parent %v", got.traceID, got.parent)
				}
				if mn == "traceparent" && (!got.parent.IsValid() || got.code != "OK") {
					t.Errorf("the caller's span was not the parent (%s)", got.code)
				}
				if got.baggage != want.baggage || got.code != want.code {
					t.Errorf("baggage %q code %s, want %q %s", got.baggage, got.code, want.baggage, want.code)
				}
			})
		}
	}
}

// TestTapLooksUpLowerCase: the tap marks a call whose headers hold a key
// the propagator asks for in upper case, as the transport hands them
// (lower case).
func TestTapLooksUpLowerCase(t *testing.T) {
	e := newExtractor(upperProp{})
	ctx, err := e.tap(context.Background(), &tap.Info{Header: metadata.MD{"x-upper-id": {"1"}}})
	if err != nil || !e.tapped(ctx) {
		t.Errorf("a call with x-upper-id not marked (err %v)", err)
	}
	ctx, _ = e.tap(context.Background(), &tap.Info{Header: metadata.MD{"x-other": {"1"}}})
	if e.tapped(ctx) {
		t.Error("a call without the key marked")
	}
}

// upperProp reads X-Upper-Id, as propagators of mixed-case headers do.
type upperProp struct{}

func (upperProp) Inject(context.Context, propagation.TextMapCarrier) {}
func (upperProp) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	_ = c.Get("X-Upper-Id")
	return ctx
}
func (upperProp) Fields() []string { return []string{"X-Upper-Id"} }

// TestUnsampledCallAllocsTapped: through the tap, an unsampled call
// costs the interceptor no more than the SDK's dropped span.
func TestUnsampledCallAllocsTapped(t *testing.T) {
	testkit.SkipUnderRace(t)
	h, tp := unsampledHandler(t)
	sdkStart := droppedSpanAllocs(tp)
	ctx, info, handler := checkCall()
	tapped, err := h.extract.tap(ctx, &tap.Info{FullMethodName: info.FullMethod, Header: envoyMetadata()})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = h.tappedUnary(tapped, nil, info, handler)
	if got := testing.AllocsPerRun(200, func() { _, _ = h.tappedUnary(tapped, nil, info, handler) }); got > sdkStart {
		t.Errorf("an unsampled call allocates %.0f times in the interceptor, want at most the SDK's %.0f", got, sdkStart)
	}
}

// BenchmarkUnsampledCallTapped is BenchmarkUnsampledCall through the
// tap, which the transport runs first.
func BenchmarkUnsampledCallTapped(b *testing.B) {
	h, _ := unsampledHandler(b)
	ctx, info, handler := checkCall()
	ti := &tap.Info{FullMethodName: info.FullMethod, Header: envoyMetadata()}
	b.ReportAllocs()
	for b.Loop() {
		tapped, _ := h.extract.tap(ctx, ti)
		_, _ = h.tappedUnary(tapped, nil, info, handler)
	}
}
