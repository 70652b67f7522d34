package grpcstats

import (
	"context"
	"net"
	"sort"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit/metrictest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Methods of the test service: Answer answers with the status code named
// by the request's service field ("" or "OK" for OK).
const (
	testService  = "svc.test.Echo"
	answerMethod = "/" + testService + "/Answer"
)

var answerDesc = testServiceDesc("Answer", func(ctx context.Context, _ any, in *healthpb.HealthCheckRequest) (any, error) {
	return answer(ctx, in)
})

// testServiceDesc is the test service with the one method named method,
// which handle implements (srv is the registered implementation),
// decoding the request and then calling the interceptor, as generated
// code does.
func testServiceDesc(method string, handle func(ctx context.Context, srv any, in *healthpb.HealthCheckRequest) (any, error)) grpc.ServiceDesc {
	return grpc.ServiceDesc{
		ServiceName: testService,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: method,
			Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
				in := new(healthpb.HealthCheckRequest)
				if err := dec(in); err != nil {
					return nil, err
				}
				if interceptor == nil {
					return handle(ctx, srv, in)
				}
				info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + testService + "/" + method}
				return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
					return handle(ctx, srv, req.(*healthpb.HealthCheckRequest))
				})
			},
		}},
	}
}

func answer(_ context.Context, in *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if in.GetService() == c.String() && c != codes.OK {
			return nil, status.Error(c, "answered "+c.String())
		}
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// observed is what a handler recorded, in a form comparable between
// handlers: ids are replaced by their relation to the caller's.
type observed struct {
	Spans  []observedSpan
	Points []observedPoint
}

type observedSpan struct {
	Name, Kind, Status, StatusMessage string
	// Parent is "caller" when the span's parent is the caller's span,
	// "" for a root span, else the parent's span id.
	Parent    string
	SameTrace bool // the span is in the caller's trace
	Attrs     map[string]string
}

type observedPoint struct {
	Attrs string // sorted key=value list
	Count uint64
}

// call is one call of a scenario: the request's service field picks the
// answer, md is sent as metadata.
type call struct {
	method  string
	service string
	md      metadata.MD
}

// callerTrace and callerSpan are the caller's trace context of calls
// that send traceparent.
const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

func sampledParent() metadata.MD {
	return metadata.Pairs("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
}

// runScenario serves the test service with the interceptors of the
// Handler newHandler returns for the providers and makes the calls, then
// returns what was recorded. sampler decides which spans are recorded.
func runScenario(t *testing.T, sampler sdktrace.Sampler, newHandler func(trace.TracerProvider, *sdkmetric.MeterProvider, propagation.TextMapPropagator) *Handler, calls []call) observed {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := newHandler(tp, mp, prop)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(h.Unary), grpc.ChainStreamInterceptor(h.Stream), grpc.WaitForHandlers(true))
	srv.RegisterService(&answerDesc, nil)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	for _, c := range calls {
		ctx := metadata.NewOutgoingContext(context.Background(), c.md)
		out := new(healthpb.HealthCheckResponse)
		err := conn.Invoke(ctx, c.method, &healthpb.HealthCheckRequest{Service: c.service}, out)
		if want := c.service; want != "" && want != "OK" && status.Code(err).String() != want && c.method == answerMethod {
			t.Fatalf("%s %s: %v", c.method, c.service, err)
		}
	}
	srv.Stop() // every call has ended: their interceptors have returned

	var o observed
	for _, s := range rec.Ended() {
		os := observedSpan{
			Name: s.Name(), Kind: s.SpanKind().String(), Status: s.Status().Code.String(),
			StatusMessage: s.Status().Description, Attrs: map[string]string{},
			SameTrace: s.SpanContext().TraceID().String() == callerTrace,
		}
		switch p := s.Parent(); {
		case !p.IsValid():
		case p.SpanID().String() == callerSpan:
			os.Parent = "caller"
		default:
			os.Parent = p.SpanID().String()
		}
		for _, kv := range s.Attributes() {
			os.Attrs[string(kv.Key)] = kv.Value.String()
		}
		// The port is the test listener's, different per run.
		if _, ok := os.Attrs["server.port"]; ok {
			os.Attrs["server.port"] = "port"
		}
		o.Spans = append(o.Spans, os)
	}
	sort.Slice(o.Spans, func(i, j int) bool { return spanKey(o.Spans[i]) < spanKey(o.Spans[j]) })

	for _, sm := range metrictest.Collect(t, reader).ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != MetricCallDuration {
				t.Errorf("metric %q recorded, want only %s", m.Name, MetricCallDuration)
				continue
			}
			if m.Unit != "s" {
				t.Errorf("%s: unit %q, want s", m.Name, m.Unit)
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("%s: %T, want a float64 histogram", m.Name, m.Data)
			}
			for _, dp := range h.DataPoints {
				if len(dp.Bounds) != len(callDurationBuckets) {
					t.Errorf("%s: bounds %v, want %v", m.Name, dp.Bounds, callDurationBuckets)
				}
				o.Points = append(o.Points, observedPoint{Attrs: setString(dp.Attributes), Count: dp.Count})
			}
		}
	}
	sort.Slice(o.Points, func(i, j int) bool { return o.Points[i].Attrs < o.Points[j].Attrs })
	return o
}

func spanKey(s observedSpan) string {
	return s.Name + "|" + s.Attrs["rpc.response.status_code"] + "|" + s.Parent
}

func setString(s attribute.Set) string {
	var b []string
	for _, kv := range s.ToSlice() {
		b = append(b, string(kv.Key)+"="+kv.Value.String())
	}
	return strings.Join(b, ",")
}

// scenario are calls of every kind: each status code, with and without
// the caller's trace context, with baggage, with an unsampled caller,
// and of an unknown method.
func scenario() []call {
	calls := []call{
		{method: answerMethod, md: sampledParent()},
		{method: answerMethod},
		{method: answerMethod, md: metadata.Pairs("traceparent", "00-"+callerTrace+"-"+callerSpan+"-00")},
		{method: answerMethod, md: metadata.Pairs("baggage", "k=v", "tracestate", "vendor=x")},
		{method: answerMethod, md: metadata.Pairs("traceparent", "not a traceparent")},
		{method: "/svc.test.Echo/Missing", md: sampledParent()},
		{method: "/svc.test.Nowhere/Answer"},
	}
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		calls = append(calls, call{method: answerMethod, service: c.String(), md: sampledParent()})
	}
	return calls
}

func ourHandler(t *testing.T) func(trace.TracerProvider, *sdkmetric.MeterProvider, propagation.TextMapPropagator) *Handler {
	return func(tp trace.TracerProvider, mp *sdkmetric.MeterProvider, prop propagation.TextMapPropagator) *Handler {
		h, err := New(Options{TracerProvider: tp, MeterProvider: mp, Propagator: prop})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
}
