package decisionlog_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	logsv1 "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	otlplogs "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/svc-dev/svc/engine/decisionlog"
	"github.com/svc-dev/svc/engine/decisionlog/spool"
	"github.com/svc-dev/svc/internal/testkit"
)

// logsServer is an OTLP logs collector whose answer to each export is
// respond's (nil: OK); it keeps the log records of the exports it
// answered OK.
type logsServer struct {
	logsv1.UnimplementedLogsServiceServer
	respond func(call int, n int) (*logsv1.ExportLogsServiceResponse, error)

	mu       sync.Mutex
	calls    int
	resource []string
	records  []*otlplogs.LogRecord
}

func (s *logsServer) Export(_ context.Context, req *logsv1.ExportLogsServiceRequest) (*logsv1.ExportLogsServiceResponse, error) {
	var got []*otlplogs.LogRecord
	var res []string
	for _, rl := range req.GetResourceLogs() {
		for _, kv := range rl.GetResource().GetAttributes() {
			res = append(res, kv.GetKey()+"="+kv.GetValue().GetStringValue())
		}
		for _, sl := range rl.GetScopeLogs() {
			got = append(got, sl.GetLogRecords()...)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.respond != nil {
		if resp, err := s.respond(s.calls, len(got)); err != nil || resp.GetPartialSuccess().GetRejectedLogRecords() != 0 {
			return resp, err
		}
	}
	s.resource = res
	s.records = append(s.records, got...)
	return &logsv1.ExportLogsServiceResponse{}, nil
}

// ids counts the decision ids of the records received.
func (s *logsServer) ids() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := map[string]int{}
	for _, r := range s.records {
		ids[attr(r, "svc.decision_id")]++
	}
	return ids
}

func attr(r *otlplogs.LogRecord, key string) string {
	for _, kv := range r.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

func startLogsServer(t *testing.T, s *logsServer) string {
	t.Helper()
	return "http://" + testkit.ServeGRPC(t, func(g *grpc.Server) { logsv1.RegisterLogsServiceServer(g, s) })
}

func newOTLP(t *testing.T, url string) *decisionlog.OTLP {
	t.Helper()
	sink, err := decisionlog.NewOTLP(decisionlog.OTLPOptions{URL: url, ServiceName: "orders-authz", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return sink
}

// Each record is one log record: the JSON as its body, the decision's
// id, tenant, outcome and reason as attributes, its time, and its trace
// and span ids; the resource names the service.
func TestOTLPLogRecord(t *testing.T) {
	srv := &logsServer{}
	sink := newOTLP(t, startLogsServer(t, srv))
	defer sink.Close()
	const traceID, spanID = "5b8aa5a2d2c872e8321cf37308d69df2", "051581bf3cb55c13"
	allow := `{"time":"2026-11-27T20:55:36.123456789Z","decision_id":"dec-1","trace_id":"` + traceID +
		`","span_id":"` + spanID + `","tenant":"acme","allow":true,"reason":"policy-allow","input":{"action":"orders:read"}}`
	deny := `{"time":"2026-11-27T20:55:37Z","decision_id":"dec-2","trace_id":"","tenant":"globex","allow":false,"reason":"policy-deny"}`
	err := sink.Send(context.Background(), []decisionlog.Record{
		{DecisionID: "dec-1", Tenant: "acme", JSON: []byte(allow)},
		{DecisionID: "dec-2", Tenant: "globex", JSON: []byte(deny)},
		{DecisionID: "dec-3", Tenant: "initech", JSON: []byte(`not json`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(srv.records) != 3 {
		t.Fatalf("%d log records, want 3", len(srv.records))
	}
	if fmt.Sprint(srv.resource) != "[service.name=orders-authz]" {
		t.Errorf("resource %v, want service.name=orders-authz", srv.resource)
	}
	a, d, bad := srv.records[0], srv.records[1], srv.records[2]
	for _, c := range []struct {
		r                             *otlplogs.LogRecord
		body, id, tenant, dec, reason string
		time                          string
		trace, span                   string
	}{
		{a, allow, "dec-1", "acme", "allow", "policy-allow", "2026-11-27T20:55:36.123456789Z", traceID, spanID},
		{d, deny, "dec-2", "globex", "deny", "policy-deny", "2026-11-27T20:55:37Z", "", ""},
		{bad, "not json", "dec-3", "initech", "", "", "", "", ""},
	} {
		r := c.r
		if got := r.GetBody().GetStringValue(); got != c.body {
			t.Errorf("%s: body %q, want the record's JSON %q", c.id, got, c.body)
		}
		for k, want := range map[string]string{"svc.decision_id": c.id, "svc.tenant": c.tenant, "svc.decision": c.dec, "svc.reason": c.reason} {
			if got := attr(r, k); got != want {
				t.Errorf("%s: %s = %q, want %q", c.id, k, got, want)
			}
		}
		var at string
		if r.GetTimeUnixNano() != 0 {
			at = time.Unix(0, int64(r.GetTimeUnixNano())).UTC().Format(time.RFC3339Nano)
		}
		if at != c.time {
			t.Errorf("%s: time %q, want %q", c.id, at, c.time)
		}
		if r.GetObservedTimeUnixNano() == 0 {
			t.Errorf("%s: no observed time", c.id)
		}
		if got := hex.EncodeToString(r.GetTraceId()); got != c.trace {
			t.Errorf("%s: trace id %q, want %q", c.id, got, c.trace)
		}
		if got := hex.EncodeToString(r.GetSpanId()); got != c.span {
			t.Errorf("%s: span id %q, want %q", c.id, got, c.span)
		}
		if r.GetSeverityNumber() != otlplogs.SeverityNumber_SEVERITY_NUMBER_INFO || r.GetSeverityText() != "INFO" {
			t.Errorf("%s: severity %v %q, want INFO", c.id, r.GetSeverityNumber(), r.GetSeverityText())
		}
	}
}

// A batch larger than one request's budget goes in several requests,
// all of which must succeed.
func TestOTLPLargeBatchSplit(t *testing.T) {
	srv := &logsServer{}
	sink := newOTLP(t, startLogsServer(t, srv))
	defer sink.Close()
	pad := strings.Repeat("x", 100<<10)
	var batch []decisionlog.Record
	for i := range 50 { // 5 MiB: more than gRPC's 4 MiB message limit
		id := fmt.Sprintf("dec-%d", i)
		batch = append(batch, decisionlog.Record{DecisionID: id, JSON: []byte(`{"decision_id":"` + id + `","pad":"` + pad + `"}`)})
	}
	if err := sink.Send(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if ids := srv.ids(); len(ids) != 50 || srv.calls < 3 {
		t.Fatalf("%d decision ids in %d requests, want 50 in at least 3", len(ids), srv.calls)
	}
}

// Send fails on a partial success that rejected log records, and on an
// error status; a batch that failed is sent again by the Logger until
// the collector takes it, so every record arrives.
func TestOTLPResend(t *testing.T) {
	srv := &logsServer{respond: func(call, n int) (*logsv1.ExportLogsServiceResponse, error) {
		switch call {
		case 1:
			return nil, status.Error(codes.Unavailable, "collector starting")
		case 2:
			return &logsv1.ExportLogsServiceResponse{PartialSuccess: &logsv1.ExportLogsPartialSuccess{
				RejectedLogRecords: 1, ErrorMessage: "one record too large",
			}}, nil
		}
		return nil, nil
	}}
	url := startLogsServer(t, srv)

	sink := newOTLP(t, url)
	batch := []decisionlog.Record{{DecisionID: "a", JSON: []byte(`{}`)}}
	if err := sink.Send(context.Background(), batch); err == nil || !strings.Contains(err.Error(), "Unavailable") {
		t.Errorf("Send with the collector unavailable: %v, want an Unavailable error", err)
	}
	if err := sink.Send(context.Background(), batch); err == nil || !strings.Contains(err.Error(), "rejected 1 of 1") {
		t.Errorf("Send with a record rejected: %v, want an error naming the rejection", err)
	}
	_ = sink.Close()

	srv.mu.Lock()
	srv.calls = 0
	srv.mu.Unlock()
	l, err := decisionlog.New(decisionlog.Options{
		Spool:         spool.Options{Dir: t.TempDir(), SegmentBytes: 64 << 10},
		FlushInterval: 20 * time.Millisecond, FsyncInterval: 20 * time.Millisecond, BatchMaxRecords: 100,
	}, newOTLP(t, url))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("logger run: %v", err)
		}
	}()
	logN(t, l, 0, 250)
	testkit.Eventually(t, "250 records shipped", func() bool { return l.Stats().Unsent == 0 })
	if st := l.Stats(); st.Retries < 2 || !st.Connected || st.Sink != "otlp" {
		t.Errorf("stats %+v, want the two failures counted as retries and the sink connected", st)
	}
	ids := srv.ids()
	for i := range 250 {
		if id := fmt.Sprintf("dec-%06d", i); ids[id] == 0 {
			t.Fatalf("decision %s never reached the collector", id)
		}
	}
}

// A collector that is not there fails the batch; it waits.
func TestOTLPUnreachable(t *testing.T) {
	sink := newOTLP(t, "http://"+testkit.DeadAddr(t))
	defer sink.Close()
	if err := sink.Send(context.Background(), []decisionlog.Record{{DecisionID: "a", JSON: []byte(`{}`)}}); err == nil ||
		!strings.HasPrefix(err.Error(), "decision log otlp:") {
		t.Fatalf("Send to a dead address: %v, want a decision log otlp error", err)
	}
}

func TestNewOTLPRefusesOtherSchemes(t *testing.T) {
	for _, u := range []string{"grpc://127.0.0.1:4317", "127.0.0.1:4317", "http://"} {
		if _, err := decisionlog.NewOTLP(decisionlog.OTLPOptions{URL: u}); err == nil {
			t.Errorf("NewOTLP(%q) succeeded, want an error", u)
		}
	}
}
