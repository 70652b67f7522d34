package grpcstats

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/svc-dev/svc/internal/testkit"
)

// BenchmarkServerCall measures unary calls over loopback to a server
// with the Handler's telemetry, whose sampler drops every span, with
// Envoy's metadata: client and server together, per call.
func BenchmarkServerCall(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	h, err := New(Options{TracerProvider: tp, MeterProvider: mp, Propagator: prop})
	if err != nil {
		b.Fatal(err)
	}
	conn := testkit.DialGRPC(b, testkit.ServeGRPC(b, func(g *grpc.Server) { g.RegisterService(&answerDesc, nil) }, serverTelemetry(h)...))
	md := envoyMetadata()
	delete(md, ":authority")
	ctx := metadata.NewOutgoingContext(context.Background(), md)
	in, out := &healthpb.HealthCheckRequest{}, new(healthpb.HealthCheckResponse)
	if err := conn.Invoke(ctx, answerMethod, in, out); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := conn.Invoke(ctx, answerMethod, in, out); err != nil {
			b.Fatal(err)
		}
	}
}

func serverTelemetry(h *Handler) []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(h.Unary), grpc.ChainStreamInterceptor(h.Stream)}
}
