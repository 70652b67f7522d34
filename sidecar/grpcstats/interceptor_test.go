package grpcstats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/metrictest"
)

// recorded is a server with the Handler's interceptors, sampling every
// span, and what it recorded.
type recorded struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	h      *Handler
	conn   *grpc.ClientConn
}

// serveWith serves descs with the Handler's interceptors.
func serveWith(t *testing.T, descs ...*grpc.ServiceDesc) *recorded {
	t.Helper()
	r := &recorded{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	h, err := New(Options{TracerProvider: tp, MeterProvider: mp, Propagator: propagation.TraceContext{}})
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	r.conn = testkit.DialGRPC(t, testkit.ServeGRPC(t, func(g *grpc.Server) {
		for _, d := range descs {
			g.RegisterService(d, nil)
		}
	}, grpc.ChainUnaryInterceptor(h.Unary), grpc.ChainStreamInterceptor(h.Stream), grpc.WaitForHandlers(true)))
	return r
}

// points returns the data points of the metric name by their attributes.
func (r *recorded) points(t *testing.T, name string) map[string]int64 {
	t.Helper()
	return metrictest.ValuesBy(metrictest.Collect(t, r.reader), name, setString)
}

const streamMethod = "/" + testService + "/Stream"

// streamDesc is a bidirectional stream that checks the call's server
// span is in its stream's context, echoes one message and ends with the
// status code the message names.
var streamDesc = grpc.ServiceDesc{
	ServiceName: testService,
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName: "Stream", ClientStreams: true, ServerStreams: true,
		Handler: func(_ any, ss grpc.ServerStream) error {
			if !trace.SpanFromContext(ss.Context()).IsRecording() {
				return status.Error(codes.FailedPrecondition, "no server span in the stream's context")
			}
			in := new(healthpb.HealthCheckRequest)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			if err := ss.SendMsg(&healthpb.HealthCheckResponse{}); err != nil {
				return err
			}
			for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
				if in.GetService() == c.String() {
					return status.Error(c, "answered "+c.String())
				}
			}
			return nil
		},
	}},
}

// TestStreamCall: a streaming call has its server span, in the stream's
// context, under the caller's span, with the status its handler ended
// with, and its duration.
func TestStreamCall(t *testing.T) {
	r := serveWith(t, &streamDesc)
	desc := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
	for _, answer := range []string{"OK", codes.Internal.String(), codes.NotFound.String()} {
		ctx := metadata.NewOutgoingContext(context.Background(), sampledParent())
		cs, err := r.conn.NewStream(ctx, desc, streamMethod)
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(&healthpb.HealthCheckRequest{Service: answer}); err != nil {
			t.Fatal(err)
		}
		_ = cs.CloseSend()
		if err := cs.RecvMsg(new(healthpb.HealthCheckResponse)); err != nil {
			t.Fatalf("%s: %v", answer, err)
		}
		err = cs.RecvMsg(new(healthpb.HealthCheckResponse))
		if got := status.Code(err).String(); (answer == "OK" && err != io.EOF) || (answer != "OK" && got != answer) {
			t.Fatalf("stream ended with %v, want %s", err, answer)
		}
	}
	waitSpans(t, r.spans, 3)
	byCode := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range r.spans.Ended() {
		byCode[attr(s, "rpc.response.status_code")] = s
	}
	for _, code := range []string{"OK", "INTERNAL", "NOT_FOUND"} {
		s, ok := byCode[code]
		if !ok {
			t.Fatalf("no span with status %s: %v", code, byCode)
		}
		if s.Name() != "svc.test.Echo/Stream" || s.SpanKind() != trace.SpanKindServer ||
			s.Parent().SpanID().String() != callerSpan || attr(s, "rpc.method") != "svc.test.Echo/Stream" ||
			attr(s, "server.address") != "127.0.0.1" || attr(s, "server.port") == "" {
			t.Errorf("%s: span %s kind %v parent %v attrs %v", code, s.Name(), s.SpanKind(), s.Parent().SpanID(), s.Attributes())
		}
	}
	if got := byCode["INTERNAL"].Status().Description; got != "answered Internal" {
		t.Errorf("INTERNAL span status %q", got)
	}
	pts := r.points(t, MetricCallDuration)
	for _, want := range []string{
		"rpc.method=svc.test.Echo/Stream,rpc.response.status_code=OK,rpc.system.name=grpc",
		"rpc.method=svc.test.Echo/Stream,rpc.response.status_code=NOT_FOUND,rpc.system.name=grpc",
		"error.type=INTERNAL,rpc.method=svc.test.Echo/Stream,rpc.response.status_code=INTERNAL,rpc.system.name=grpc",
	} {
		if pts[want] != 1 {
			t.Errorf("duration points %v, want one of %s", pts, want)
		}
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// waitSpans waits for n ended spans: a call's span ends on the server,
// after the client may have its answer.
func waitSpans(t *testing.T, rec *tracetest.SpanRecorder, n int) {
	t.Helper()
	testkit.Poll(t, 5*time.Second, fmt.Sprintf("%d spans to end", n), func() (bool, string) {
		ended := len(rec.Ended())
		return ended >= n, fmt.Sprintf("%d ended", ended)
	})
}

// blockDesc's Block waits for its caller to go, then answers as the
// request's service field says: "ctx" with the context's error, else OK.
var blockDesc = testServiceDesc("Block", func(ctx context.Context, _ any, in *healthpb.HealthCheckRequest) (any, error) {
	<-ctx.Done()
	if in.GetService() == "ctx" {
		return nil, ctx.Err()
	}
	return &healthpb.HealthCheckResponse{}, nil
})

// TestCanceledCall: a call its caller cancels is recorded CANCELLED,
// whether its handler returns the context's error or answers regardless
// (an answer nobody receives). A call past its deadline is recorded with
// what the server sees first, its own deadline or the caller's reset
// (DEADLINE_EXCEEDED or CANCELLED; TestCallStatus has both).
func TestCanceledCall(t *testing.T) {
	r := serveWith(t, &blockDesc)
	for _, answer := range []string{"ctx", "ok"} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		if err := r.conn.Invoke(ctx, "/"+testService+"/Block", &healthpb.HealthCheckRequest{Service: answer}, new(healthpb.HealthCheckResponse)); status.Code(err) != codes.Canceled {
			t.Fatalf("%s: %v, want CANCELLED", answer, err)
		}
	}
	waitSpans(t, r.spans, 2)
	for _, s := range r.spans.Ended() {
		if got := attr(s, "rpc.response.status_code"); got != "CANCELLED" {
			t.Errorf("span status code %s, want CANCELLED", got)
		}
	}
	pts := r.points(t, MetricCallDuration)
	if n := pts["rpc.method=svc.test.Echo/Block,rpc.response.status_code=CANCELLED,rpc.system.name=grpc"]; n != 2 || len(pts) != 1 {
		t.Errorf("durations %v, want 2 CANCELLED", pts)
	}
}

// TestCallStatus: the status of a call is the one gRPC answers it with.
func TestCallStatus(t *testing.T) {
	live := context.Background()
	canceled, cancel := context.WithCancel(live)
	cancel()
	expired, cancel2 := context.WithDeadline(live, time.Now().Add(-time.Second))
	defer cancel2()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want codes.Code
	}{
		{"ok", live, nil, codes.OK},
		{"ok to a canceled caller", canceled, nil, codes.Canceled},
		{"ok past the deadline", expired, nil, codes.DeadlineExceeded},
		{"status", live, status.Error(codes.PermissionDenied, "no"), codes.PermissionDenied},
		{"wrapped status", live, fmt.Errorf("w: %w", status.Error(codes.NotFound, "no")), codes.NotFound},
		{"context canceled", canceled, context.Canceled, codes.Canceled},
		{"wrapped deadline", expired, fmt.Errorf("w: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{"plain error", live, errors.New("boom"), codes.Unknown},
		{"status on a canceled call", canceled, status.Error(codes.Internal, "x"), codes.Internal},
	} {
		st := callStatus(tc.ctx, tc.err)
		got := codes.OK
		if st != nil {
			got = st.Code()
		}
		// What the server answers: a status error's code, a context
		// error's code, else UNKNOWN.
		if got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if tc.err != nil {
			if s, ok := status.FromError(tc.err); ok && s.Code() != got {
				t.Errorf("%s: %v, gRPC answers %v", tc.name, got, s.Code())
			}
		}
	}
}

// TestCountUndecodable: a request that does not decode is counted by its
// message type.
func TestCountUndecodable(t *testing.T) {
	r := serveWith(t)
	r.h.CountUndecodable(new(healthpb.HealthCheckRequest))
	r.h.CountUndecodable(new(healthpb.HealthCheckRequest))
	r.h.CountUndecodable("not a message")
	want := map[string]int64{"message=grpc.health.v1.HealthCheckRequest": 2, "message=unknown": 1}
	if got := r.points(t, MetricUndecodable); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("undecodable counts %v, want %v", got, want)
	}
}
