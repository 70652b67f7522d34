package harness

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	logsv1 "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	metricsv1 "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
)

// Span is one span received over OTLP, flattened for assertions.
type Span struct {
	// Name is the span name.
	Name string
	// TraceID, SpanID and ParentID (empty for a root span) are
	// hex-encoded.
	TraceID, SpanID, ParentID string
	// Attrs holds the span attributes; values are strings, or for arrays
	// their elements joined with ",".
	Attrs map[string]string
	// Resource holds the resource attributes of the span's batch.
	Resource map[string]string
}

// LogRecord is one log record received over OTLP, flattened for
// assertions.
type LogRecord struct {
	// Body is the body when a string (else its string form, as Attrs).
	Body string
	// Time is the record's time; zero when unset.
	Time time.Time
	// Severity is the severity text.
	Severity string
	// TraceID and SpanID are hex-encoded, empty when unset.
	TraceID, SpanID string
	// Attrs holds the record's attributes, as Span.Attrs.
	Attrs map[string]string
	// Resource holds the resource attributes of the record's batch.
	Resource map[string]string
}

// OTLPReceiver is an OTLP gRPC collector that keeps every span and log
// record it receives; metrics exports are accepted and counted.
type OTLPReceiver struct {
	tracev1.UnimplementedTraceServiceServer
	// Addr is the listen address, "127.0.0.1:port"; Endpoint is its URL
	// for OTEL_EXPORTER_OTLP_ENDPOINT.
	Addr, Endpoint string

	mu             sync.Mutex
	spans          []Span
	logs           []LogRecord
	metricsExports int
}

// StartOTLPReceiver serves OTLP gRPC on a free loopback port until the
// test ends.
func StartOTLPReceiver(t testing.TB) *OTLPReceiver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("otlp listen: %v", err)
	}
	r := &OTLPReceiver{Addr: l.Addr().String()}
	r.Endpoint = "http://" + r.Addr
	srv := grpc.NewServer()
	tracev1.RegisterTraceServiceServer(srv, r)
	metricsv1.RegisterMetricsServiceServer(srv, metricsReceiver{r: r})
	logsv1.RegisterLogsServiceServer(srv, logsReceiver{r: r})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return r
}

// Export implements the OTLP trace service.
func (r *OTLPReceiver) Export(_ context.Context, req *tracev1.ExportTraceServiceRequest) (*tracev1.ExportTraceServiceResponse, error) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		res := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{
					Name:     s.GetName(),
					TraceID:  hex.EncodeToString(s.GetTraceId()),
					SpanID:   hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()),
					Attrs:    attrMap(s.GetAttributes()),
					Resource: res,
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	return &tracev1.ExportTraceServiceResponse{}, nil
}

// Spans returns the spans received so far.
func (r *OTLPReceiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// SpansNamed returns the spans received so far with the given name.
func (r *OTLPReceiver) SpansNamed(name string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// MetricsExports returns how many metrics export requests arrived.
func (r *OTLPReceiver) MetricsExports() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.metricsExports
}

// Logs returns the log records received so far.
func (r *OTLPReceiver) Logs() []LogRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]LogRecord(nil), r.logs...)
}

type logsReceiver struct {
	logsv1.UnimplementedLogsServiceServer
	r *OTLPReceiver
}

func (l logsReceiver) Export(_ context.Context, req *logsv1.ExportLogsServiceRequest) (*logsv1.ExportLogsServiceResponse, error) {
	var got []LogRecord
	for _, rl := range req.GetResourceLogs() {
		res := attrMap(rl.GetResource().GetAttributes())
		for _, sl := range rl.GetScopeLogs() {
			for _, lr := range sl.GetLogRecords() {
				rec := LogRecord{
					Body:     anyString(lr.GetBody()),
					Severity: lr.GetSeverityText(),
					TraceID:  hex.EncodeToString(lr.GetTraceId()),
					SpanID:   hex.EncodeToString(lr.GetSpanId()),
					Attrs:    attrMap(lr.GetAttributes()),
					Resource: res,
				}
				if ns := lr.GetTimeUnixNano(); ns != 0 {
					rec.Time = time.Unix(0, int64(ns)).UTC()
				}
				got = append(got, rec)
			}
		}
	}
	l.r.mu.Lock()
	l.r.logs = append(l.r.logs, got...)
	l.r.mu.Unlock()
	return &logsv1.ExportLogsServiceResponse{}, nil
}

type metricsReceiver struct {
	metricsv1.UnimplementedMetricsServiceServer
	r *OTLPReceiver
}

func (m metricsReceiver) Export(context.Context, *metricsv1.ExportMetricsServiceRequest) (*metricsv1.ExportMetricsServiceResponse, error) {
	m.r.mu.Lock()
	m.r.metricsExports++
	m.r.mu.Unlock()
	return &metricsv1.ExportMetricsServiceResponse{}, nil
}

func attrMap(kvs []*commonv1.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = anyString(kv.GetValue())
	}
	return m
}

func anyString(v *commonv1.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonv1.AnyValue_StringValue:
		return x.StringValue
	case *commonv1.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonv1.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonv1.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonv1.AnyValue_ArrayValue:
		parts := make([]string, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, anyString(e))
		}
		return strings.Join(parts, ",")
	case *commonv1.AnyValue_BytesValue:
		return hex.EncodeToString(x.BytesValue)
	}
	return ""
}
