package sidecar

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/sidecar/live"
	"github.com/svc-dev/svc/sidecar/telemetry"
)

// liveSidecar is a sidecar wired as svc-sidecar wires it: telemetry with
// span and log feeds (the logger writing only errors), and a live hub
// that the engine reports its decisions to.
type liveSidecar struct {
	*running
	hub *live.Hub
}

func startLiveSidecar(t testing.TB, cfg config.Config) *liveSidecar {
	t.Helper()
	log, tel := newTestTelemetry(t, io.Discard, "error")
	hub := live.NewHub(live.Deps{Spans: tel.Spans(), Logs: tel.Logs(), Logger: log})
	e, err := engine.New(cfg, engine.Deps{Logger: log, TracerProvider: tel.TracerProvider(),
		MeterProvider: tel.MeterProvider(), Observer: hub})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	r := startServer(t, Deps{Engine: e, Telemetry: tel, Live: hub, Logger: log})
	testkit.Eventually(t, "GET /readyz answers 200", func() bool {
		status, _ := get(t, r, PathReadyz)
		return status == http.StatusOK
	})
	return &liveSidecar{running: r, hub: hub}
}

// newTestTelemetry is the telemetry of a test's sidecar, logging at
// level and above to logs.
func newTestTelemetry(t testing.TB, logs io.Writer, level string) (*slog.Logger, *telemetry.Telemetry) {
	t.Helper()
	log, _, err := telemetry.NewLogger(logs, level)
	if err != nil {
		t.Fatal(err)
	}
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return log, tel
}

// stream is an open NDJSON stream whose lines arrive on a channel.
type stream struct {
	lines chan map[string]any
	done  chan struct{}
	close func()
}

func openStream(t testing.TB, r *running, path string, q url.Values) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	u := "http://" + r.HTTPAddr().String() + path + "?" + q.Encode()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", u, err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("GET %s = %d %s %s", u, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &stream{lines: make(chan map[string]any, 1024), done: make(chan struct{}), close: cancel}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				// A stream closed by the test ends in the middle of a
				// line: the scanner hands over that part at the end.
				if ctx.Err() == nil {
					t.Errorf("stream line %q is not JSON: %v", sc.Text(), err)
				}
				return
			}
			select {
			case s.lines <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	// The reader ends before the test does, so that it never reports
	// into a finished test.
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	return s
}

func (s *stream) next(t testing.TB) map[string]any {
	t.Helper()
	select {
	case m := <-s.lines:
		return m
	case <-s.done:
		t.Fatal("stream ended")
	case <-time.After(waitTimeout):
		t.Fatal("no stream record within the wait")
	}
	return nil
}

// quiet fails when a record arrives within d.
func (s *stream) quiet(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case m := <-s.lines:
		t.Fatalf("unexpected record %v", m)
	case <-time.After(d):
	}
}

func attr(m map[string]any, k string) string {
	a, _ := m["attributes"].(map[string]any)
	s, _ := a[k].(string)
	return s
}

func TestStreamsLogAndDecisionRecordsWhateverTheLogLevel(t *testing.T) {
	idp := newTestIdP(t)
	ls := startLiveSidecar(t, testConfig(idp))
	conn := dial(t, ls.GRPCAddr())
	viewer := idp.token(t, "u-viewer", testTenant, "viewer")
	if ls.hub.Observing() {
		t.Fatal("Observing() with nobody watching")
	}

	logs := openStream(t, ls.running, live.PathLogs, url.Values{"filter": {"policy.result=denied AND (tenant=acme OR tenant=globex)"}})
	decisions := openStream(t, ls.running, live.PathDecisions, url.Values{"errors_only": {"true"}})
	if !ls.hub.Observing() {
		t.Fatal("Observing() false while two streams are open")
	}
	if !allowed(t, conn, viewer, "/orders/1") {
		t.Fatal("viewer may not read orders")
	}
	if deleteAllowed(t, conn, viewer, "/orders/1") {
		t.Fatal("viewer may delete orders")
	}

	// The logger writes errors only; the decision's record still comes.
	rec := logs.next(t)
	if rec["msg"] != live.DecisionMessage || rec["level"] != "WARN" || attr(rec, "policy.result") != "denied" ||
		attr(rec, "action") != "orders:delete" || attr(rec, "user_id") != "u-viewer" || attr(rec, "reason") != "policy-deny" {
		t.Errorf("log record = %v, want the denied orders:delete decision", rec)
	}
	if rec["trace_id"] == "" || attr(rec, "decision_id") == "" {
		t.Errorf("log record without trace or decision id: %v", rec)
	}
	d := decisions.next(t)
	if d["allow"] != false || d["action"] != "orders:delete" || d["tenant"] != testTenant || d["decision_id"] != attr(rec, "decision_id") {
		t.Errorf("decision = %v, want the denied one of the log record", d)
	}
	logs.quiet(t, 300*time.Millisecond)
	decisions.quiet(t, 10*time.Millisecond)

	logs.close()
	decisions.close()
	testkit.Eventually(t, "the hub stops observing once the streams are closed", func() bool { return !ls.hub.Observing() })
}

func TestStreamsSinceReplaysRecentDecisions(t *testing.T) {
	idp := newTestIdP(t)
	ls := startLiveSidecar(t, testConfig(idp))
	conn := dial(t, ls.GRPCAddr())
	viewer := idp.token(t, "u-viewer", testTenant, "viewer")

	first := openStream(t, ls.running, live.PathDecisions, nil)
	allowed(t, conn, viewer, "/orders/1")
	deleteAllowed(t, conn, viewer, "/orders/2")
	a, b := first.next(t), first.next(t)
	first.close()

	replay := openStream(t, ls.running, live.PathDecisions, url.Values{"since": {"1m"}})
	if got := replay.next(t); got["decision_id"] != a["decision_id"] {
		t.Errorf("first replayed = %v, want %v", got["decision_id"], a["decision_id"])
	}
	if got := replay.next(t); got["decision_id"] != b["decision_id"] {
		t.Errorf("second replayed = %v, want %v", got["decision_id"], b["decision_id"])
	}
	none := openStream(t, ls.running, live.PathDecisions, url.Values{"since": {"1m"}, "tenant": {"globex"}})
	none.quiet(t, 200*time.Millisecond)

}

func TestStreamsWithoutSinceStartNow(t *testing.T) {
	idp := newTestIdP(t)
	ls := startLiveSidecar(t, testConfig(idp))
	conn := dial(t, ls.GRPCAddr())
	viewer := idp.token(t, "u-viewer", testTenant, "viewer")
	paths := []string{live.PathDecisions, live.PathLogs, live.PathSpans}
	var watching []*stream
	for _, p := range paths {
		watching = append(watching, openStream(t, ls.running, p, nil))
	}
	allowed(t, conn, viewer, "/orders/1")
	for _, s := range watching {
		s.next(t)
		s.close()
	}
	for _, p := range paths {
		// The feeds hold the decision: since replays it...
		openStream(t, ls.running, p, url.Values{"since": {"1m"}}).next(t)
		// ...and a stream without since does not.
		openStream(t, ls.running, p, nil).quiet(t, 200*time.Millisecond)
	}
}

func TestStreamsSpansShowFailingTracesWhole(t *testing.T) {
	idp := newTestIdP(t)
	ls := startLiveSidecar(t, testConfig(idp))
	conn := dial(t, ls.GRPCAddr())
	viewer := idp.token(t, "u-viewer", testTenant, "viewer")

	spans := openStream(t, ls.running, live.PathSpans, url.Values{"errors_only": {"true"}, "tenant": {testTenant}})
	allowed(t, conn, viewer, "/orders/1")
	deleteAllowed(t, conn, viewer, "/orders/1")

	byName := map[string]map[string]any{}
	for len(byName) < 3 {
		sp := spans.next(t)
		byName[sp["name"].(string)] = sp
	}
	server := byName["envoy.service.auth.v3.Authorization/Check"]
	verify, eval := byName[engine.SpanVerifyToken], byName[engine.SpanEvaluate]
	if server == nil || verify == nil || eval == nil {
		t.Fatalf("spans = %v, want the server span, %s and %s", byName, engine.SpanVerifyToken, engine.SpanEvaluate)
	}
	for _, sp := range []map[string]any{verify, eval} {
		if sp["trace_id"] != server["trace_id"] || sp["parent_id"] != server["span_id"] {
			t.Errorf("%s is not a child of the server span: %v", sp["name"], sp)
		}
	}
	if attr(eval, engine.AttrResult) != "deny" || attr(eval, engine.AttrAction) != "orders:delete" ||
		attr(eval, engine.AttrMatchedRule) == "" || server["kind"] != "server" || server["service"] != "svc-sidecar" {
		t.Errorf("policy.evaluate = %v, server = %v", eval, server)
	}
	spans.quiet(t, 300*time.Millisecond)
}

func TestStreamsRefuseBadQueries(t *testing.T) {
	ls := startLiveSidecar(t, testConfig(newTestIdP(t)))
	tests := []struct {
		name, path, query, code, msg string
	}{
		{"malformed filter", live.PathLogs, "filter=" + url.QueryEscape("policy.result=denied AND"), "filter-invalid", "position 25"},
		{"unknown parameter", live.PathDecisions, "tenat=acme", "input-invalid", "unknown parameter"},
		{"level on spans", live.PathSpans, "level=info", "input-invalid", "this stream takes since, tenant, service"},
		{"bad since", live.PathLogs, "since=yesterday", "input-invalid", "since"},
		{"bad level", live.PathLogs, "level=loud", "input-invalid", "level"},
		{"bad trace id", live.PathSpans, "trace_id=xyz", "input-invalid", "trace_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := get(t, ls.running, tt.path+"?"+tt.query)
			if status != http.StatusBadRequest || errorCode(body) != tt.code || !strings.Contains(string(body), tt.msg) {
				t.Errorf("GET %s?%s = %d %s, want 400 %s mentioning %q", tt.path, tt.query, status, body, tt.code, tt.msg)
			}
		})
	}
}

func TestStreamsAreAdminGuarded(t *testing.T) {
	ls := startLiveSidecar(t, testConfig(newTestIdP(t)))
	for _, p := range []string{live.PathSpans, live.PathLogs, live.PathDecisions} {
		req := httptest.NewRequest(http.MethodGet, p, nil)
		req.RemoteAddr = "10.1.2.3:5555"
		rec := httptest.NewRecorder()
		ls.http.Handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Errorf("GET %s from a remote caller = %d, want 403", p, rec.Code)
		}
	}
}

func TestStreamsEndWhenTheSidecarStops(t *testing.T) {
	ls := startLiveSidecar(t, testConfig(newTestIdP(t)))
	s := openStream(t, ls.running, live.PathLogs, nil)
	start := time.Now()
	if err := ls.stop(t); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if d := time.Since(start); d > waitTimeout/2 {
		t.Errorf("stopping took %s with a stream open: the drain waited for it", d)
	}
	select {
	case <-s.done:
	case <-time.After(waitTimeout):
		t.Fatal("the stream is still open after the sidecar stopped")
	}
}

// deleteAllowed asks the sidecar over gRPC whether token may DELETE path.
func deleteAllowed(t testing.TB, conn *grpc.ClientConn, token, path string) bool {
	t.Helper()
	return allowedMethod(t, conn, token, http.MethodDelete, path)
}
