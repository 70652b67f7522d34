package grpcstats

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/histtest"
	"github.com/svc-dev/svc/internal/testkit/metrictest"
)

// TestCallDurationHistograms: rpc.server.call.duration recorded in the
// provider's otelhist.Registry has the SDK instrument's scope, name,
// description, unit, buckets, series and counts, for calls of varied
// methods and status codes (the durations themselves differ: they are
// measured).
func TestCallDurationHistograms(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	sdkReader := sdkmetric.NewManualReader()
	sdkH, err := New(Options{TracerProvider: tp, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkReader)),
		Propagator: propagation.TraceContext{}})
	if err != nil {
		t.Fatal(err)
	}
	histMP, histReader := histtest.Provider()
	histH, err := New(Options{TracerProvider: tp, MeterProvider: histMP, Propagator: propagation.TraceContext{}})
	if err != nil {
		t.Fatal(err)
	}
	if histH.hist == nil || histH.duration != nil || sdkH.hist != nil {
		t.Fatal("the histogram is not recorded where the provider offers")
	}
	methods := []string{"/envoy.service.auth.v3.Authorization/Check", "/grpc.health.v1.Health/Check", "noslash"}
	results := []codes.Code{codes.OK, codes.PermissionDenied, codes.Unauthenticated, codes.Internal, codes.Unavailable, codes.Code(42)}
	for i := range 200 {
		method, code := methods[i%len(methods)], results[(i/3)%len(results)]
		handler := func(context.Context, any) (any, error) {
			if code == codes.OK {
				return nil, nil
			}
			return nil, status.Error(code, "no")
		}
		info := &grpc.UnaryServerInfo{FullMethod: method}
		_, _ = sdkH.Unary(context.Background(), nil, info, handler)
		_, _ = histH.Unary(context.Background(), nil, info, handler)
	}
	wantScope, want := metrictest.Metric(t, sdkReader, MetricCallDuration)
	gotScope, got := metrictest.Metric(t, histReader, MetricCallDuration)
	if gotScope != wantScope {
		t.Errorf("scope %+v, want %+v", gotScope, wantScope)
	}
	if got.Name != want.Name || got.Description != want.Description || got.Unit != want.Unit {
		t.Errorf("metric %q %q %q, want %q %q %q", got.Name, got.Description, got.Unit, want.Name, want.Description, want.Unit)
	}
	wh, gh := want.Data.(metricdata.Histogram[float64]), got.Data.(metricdata.Histogram[float64])
	if gh.Temporality != wh.Temporality {
		t.Errorf("temporality %v, want %v", gh.Temporality, wh.Temporality)
	}
	counts := func(h metricdata.Histogram[float64]) map[string]uint64 {
		out := map[string]uint64{}
		for _, dp := range h.DataPoints {
			if len(dp.Bounds) != len(callDurationBuckets) {
				t.Errorf("bounds %v", dp.Bounds)
			}
			out[setString(dp.Attributes)] = dp.Count
		}
		return out
	}
	wc, gc := counts(wh), counts(gh)
	if len(wc) != len(methods)*len(results) {
		t.Fatalf("SDK recorded %d series, want %d", len(wc), len(methods)*len(results))
	}
	for k, n := range wc {
		if gc[k] != n {
			t.Errorf("%s: count %d, want %d", k, gc[k], n)
		}
	}
	if len(gc) != len(wc) {
		t.Errorf("%d series, want %d", len(gc), len(wc))
	}
}

// TestUnsampledCallAllocsHist: with the otelhist histogram too, an
// unsampled call costs the interceptor no more than the SDK's dropped
// span.
func TestUnsampledCallAllocsHist(t *testing.T) {
	testkit.SkipUnderRace(t)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	mp, _ := histtest.Provider()
	h, err := New(Options{TracerProvider: tp, MeterProvider: mp,
		Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})})
	if err != nil {
		t.Fatal(err)
	}
	sdkStart := testing.AllocsPerRun(100, func() {
		_, span := tp.Tracer("t").Start(context.Background(), "s")
		span.End()
	})
	ctx, info, handler := checkCall()
	_, _ = h.Unary(ctx, nil, info, handler)
	if got := testing.AllocsPerRun(200, func() { _, _ = h.Unary(ctx, nil, info, handler) }); got > sdkStart {
		t.Errorf("an unsampled call allocates %.0f times in the interceptor, want at most the SDK's %.0f", got, sdkStart)
	}
}

// BenchmarkUnsampledCallHist is BenchmarkUnsampledCall with the
// duration in an otelhist.Registry, as the sidecar records it.
func BenchmarkUnsampledCallHist(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	mp, _ := histtest.Provider()
	h, err := New(Options{TracerProvider: tp, MeterProvider: mp,
		Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})})
	if err != nil {
		b.Fatal(err)
	}
	ctx, info, handler := checkCall()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = h.Unary(ctx, nil, info, handler)
	}
}
