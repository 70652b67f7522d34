package telemetry

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	collectormetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	collectortracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/internal/testkit"
)

// collector is an OTLP/gRPC receiver for traces and metrics on loopback.
type collector struct {
	addr string

	mu      sync.Mutex
	traces  []*collectortracepb.ExportTraceServiceRequest
	metrics []*collectormetricspb.ExportMetricsServiceRequest
}

func startCollector(t *testing.T) *collector {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{addr: lis.Addr().String()}
	srv := grpc.NewServer()
	collectortracepb.RegisterTraceServiceServer(srv, traceService{collector: c})
	collectormetricspb.RegisterMetricsServiceServer(srv, metricsService{collector: c})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return c
}

// traceService implements collectortracepb.TraceServiceServer.
type traceService struct {
	collectortracepb.UnimplementedTraceServiceServer
	*collector
}

func (ts traceService) Export(_ context.Context, req *collectortracepb.ExportTraceServiceRequest) (*collectortracepb.ExportTraceServiceResponse, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.traces = append(ts.traces, proto.Clone(req).(*collectortracepb.ExportTraceServiceRequest))
	return &collectortracepb.ExportTraceServiceResponse{}, nil
}

// metricsService implements collectormetricspb.MetricsServiceServer.
type metricsService struct {
	collectormetricspb.UnimplementedMetricsServiceServer
	*collector
}

func (m metricsService) Export(_ context.Context, req *collectormetricspb.ExportMetricsServiceRequest) (*collectormetricspb.ExportMetricsServiceResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.metrics = append(m.metrics, proto.Clone(req).(*collectormetricspb.ExportMetricsServiceRequest))
	return &collectormetricspb.ExportMetricsServiceResponse{}, nil
}

// receivedSpan is a span as the collector received it.
type receivedSpan struct {
	name, traceID, spanID, parentID string
	attrs                           map[string]string
	resource                        map[string]string
}

func (c *collector) spans() []receivedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []receivedSpan
	for _, req := range c.traces {
		for _, rs := range req.GetResourceSpans() {
			res := attrMap(rs.GetResource().GetAttributes())
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					out = append(out, receivedSpan{
						name:     s.GetName(),
						traceID:  hex.EncodeToString(s.GetTraceId()),
						spanID:   hex.EncodeToString(s.GetSpanId()),
						parentID: hex.EncodeToString(s.GetParentSpanId()),
						attrs:    attrMap(s.GetAttributes()),
						resource: res,
					})
				}
			}
		}
	}
	return out
}

// counterTotal returns the last cumulative value of a sum metric and the
// resource it came with.
func (c *collector) counterTotal(name string, attr attribute.KeyValue) (value int64, resource map[string]string, found bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, req := range c.metrics {
		for _, rm := range req.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					if m.GetName() != name {
						continue
					}
					for _, dp := range m.GetSum().GetDataPoints() {
						if attrMap(dp.GetAttributes())[string(attr.Key)] == attr.Value.String() {
							value, resource, found = dp.GetAsInt(), attrMap(rm.GetResource().GetAttributes()), true
						}
					}
				}
			}
		}
	}
	return value, resource, found
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetArrayValue() != nil:
			var parts []string
			for _, e := range v.GetArrayValue().GetValues() {
				parts = append(parts, e.GetStringValue())
			}
			m[kv.GetKey()] = strings.Join(parts, ",")
		default:
			m[kv.GetKey()] = v.GetStringValue()
		}
	}
	return m
}

func quietLogger() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// emit records the two engine spans and a counter through tel.
func emit(t *testing.T, tel *Telemetry) (parent, child trace.SpanContext) {
	t.Helper()
	tracer := tel.TracerProvider().Tracer("telemetry-test")
	ctx, verify := tracer.Start(context.Background(), "auth.verify_token",
		trace.WithAttributes(attribute.String("svc.tenant", "acme"), attribute.String("svc.reason", "ok")))
	_, eval := tracer.Start(ctx, "policy.evaluate", trace.WithAttributes(
		attribute.String("svc.result", "deny"),
		attribute.StringSlice("svc.deny_reasons", []string{"missing-role", "tenant-mismatch"})))
	eval.End()
	verify.End()

	counter, err := tel.MeterProvider().Meter("telemetry-test").Int64Counter("svc.test.requests")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(context.Background(), 2, metric.WithAttributes(attribute.String("tenant", "acme")))
	counter.Add(context.Background(), 1, metric.WithAttributes(attribute.String("tenant", "acme")))
	return verify.SpanContext(), eval.SpanContext()
}

func TestOTLPExport(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(addr string) Options
	}{
		{"http_url", func(addr string) Options { return Options{OTLPEndpoint: "http://" + addr} }},
		{"host_port_insecure", func(addr string) Options { return Options{OTLPEndpoint: addr, Insecure: true} }},
		{"per_signal_endpoints", func(addr string) Options {
			return Options{TracesEndpoint: "http://" + addr, MetricsEndpoint: "http://" + addr + "/v1/metrics"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCollector(t)
			opts := tc.opts(c.addr)
			opts.ServiceName, opts.ServiceVersion, opts.Logger = "svc-test", "1.2.3", quietLogger()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tel, err := Setup(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			parent, child := emit(t, tel)
			if err := tel.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}

			got := map[string]receivedSpan{}
			for _, s := range c.spans() {
				got[s.name] = s
			}
			verify, ok := got["auth.verify_token"]
			if !ok {
				t.Fatalf("auth.verify_token not received; got %v", got)
			}
			eval, ok := got["policy.evaluate"]
			if !ok {
				t.Fatalf("policy.evaluate not received; got %v", got)
			}
			if verify.attrs["svc.tenant"] != "acme" || verify.attrs["svc.reason"] != "ok" {
				t.Errorf("auth.verify_token attributes = %v", verify.attrs)
			}
			if eval.attrs["svc.result"] != "deny" || eval.attrs["svc.deny_reasons"] != "missing-role,tenant-mismatch" {
				t.Errorf("policy.evaluate attributes = %v", eval.attrs)
			}
			if eval.parentID != parent.SpanID().String() || eval.spanID != child.SpanID().String() || eval.traceID != parent.TraceID().String() {
				t.Errorf("policy.evaluate ids = %+v, want child of %s", eval, parent.SpanID())
			}
			for _, s := range []receivedSpan{verify, eval} {
				if s.resource["service.name"] != "svc-test" || s.resource["service.version"] != "1.2.3" {
					t.Errorf("%s resource = %v", s.name, s.resource)
				}
			}

			v, res, found := c.counterTotal("svc.test.requests", attribute.String("tenant", "acme"))
			if !found || v != 3 {
				t.Errorf("svc.test.requests{tenant=acme} = %d (found %v), want 3", v, found)
			}
			if res["service.name"] != "svc-test" {
				t.Errorf("metric resource = %v", res)
			}
		})
	}
}

func TestSetupInstallsNoGlobals(t *testing.T) {
	tpBefore, mpBefore := otel.GetTracerProvider(), otel.GetMeterProvider()
	tel, err := Setup(context.Background(), Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if otel.GetTracerProvider() != tpBefore || otel.GetMeterProvider() != mpBefore {
		t.Error("Setup changed the global providers")
	}
	if tel.Spans() == nil || tel.Logs() != nil {
		t.Errorf("Spans() = %v, Logs() = %v; want a span feed and no log feed for a foreign logger", tel.Spans(), tel.Logs())
	}
}

func TestSetupRejectsBadEndpoint(t *testing.T) {
	for _, ep := range []string{"collector", "grpc://collector:4317", "http://:4317", "collector:port"} {
		t.Run(ep, func(t *testing.T) {
			if _, err := Setup(context.Background(), Options{OTLPEndpoint: ep, Logger: quietLogger()}); err == nil {
				t.Errorf("Setup accepted endpoint %q", ep)
			}
		})
	}
}

func TestShutdownBoundedByContext(t *testing.T) {
	// A collector that never answers: nothing listens behind the port
	// once the listener is closed, so export keeps failing until ctx ends.
	addr := testkit.DeadAddr(t)
	tel, err := Setup(context.Background(), Options{OTLPEndpoint: "http://" + addr, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	emit(t, tel)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = tel.Shutdown(ctx) // an export error is expected
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown took %s with a 300ms context", d)
	}
}

// TestOTLPExportLimit: a trace export request larger than
// maxTraceRequest is not sent (gRPC refuses it once marshalled, as the
// exporter refused it before marshalling), and a smaller one still is.
func TestOTLPExportLimit(t *testing.T) {
	old := maxTraceRequest
	maxTraceRequest = 4 << 10
	t.Cleanup(func() { maxTraceRequest = old })
	c, ctx, tel := setupWithCollector(t)
	tr := tel.TracerProvider().Tracer("limit")
	_, big := tr.Start(ctx, "big")
	big.SetAttributes(attribute.String("blob", strings.Repeat("x", 8<<10)))
	big.End()
	if err := tel.tp.ForceFlush(ctx); err != nil {
		t.Logf("flush of the oversized request: %v", err)
	}
	_, small := tr.Start(ctx, "small")
	small.End()
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	var names []string
	for _, s := range c.spans() {
		names = append(names, s.name)
	}
	if strings.Join(names, ",") != "small" {
		t.Errorf("spans received: %q, want only the small one", names)
	}
}

// setupWithCollector sets telemetry up to export to a collector of its
// own, with a context that ends 20 s into the test.
func setupWithCollector(t *testing.T) (*collector, context.Context, *Telemetry) {
	t.Helper()
	c := startCollector(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	tel, err := Setup(ctx, Options{OTLPEndpoint: "http://" + c.addr, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return c, ctx, tel
}
