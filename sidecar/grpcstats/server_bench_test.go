package grpcstats

import (
	"context"
	"net"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
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
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(serverTelemetry(h)...)
	srv.RegisterService(&answerDesc, nil)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
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
