package sidecar

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/envoy"
	"github.com/svc-dev/svc/sidecar/live"
)

// Caller's trace context, as nginx or an SDK would pass it on.
const (
	callerTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID  = "00f067aa0ba902b7"
	traceparent   = "00-" + callerTraceID + "-" + callerSpanID + "-01"
)

// sendHTTP sends one decision request to the sidecar's HTTP listener and
// returns the status.
func sendHTTP(t *testing.T, r *running, method, path, body string, header http.Header) int {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+r.HTTPAddr().String()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestHTTPDecisionsAreOneTraceUnderAServerSpan(t *testing.T) {
	idp := newTestIdP(t)
	ls := startLiveSidecar(t, testConfig(idp))
	viewer := idp.token(t, "u-viewer", testTenant, "viewer")
	bearer := http.Header{"Authorization": {"Bearer " + viewer}}
	withParent := func(h http.Header) http.Header {
		h = h.Clone()
		h.Set("Traceparent", traceparent)
		return h
	}
	nginx := http.Header{"Authorization": {"Bearer " + viewer}, "X-Original-Uri": {"/orders/7"}, "X_svc_method": {"DELETE"}}
	tests := []struct {
		name, method, path, body string
		header                   http.Header
		status                   int
		server                   string
		spans                    []string // the engine's spans under the server span
		result                   string   // policy.evaluate's svc.result
	}{
		{"authorize", http.MethodPost, authz.PathAuthorize, `{"action":"orders:read","resource":{"id":"o-1"}}`, bearer,
			http.StatusOK, "POST " + authz.PathAuthorize, []string{engine.SpanVerifyToken, engine.SpanEvaluate}, "allow"},
		{"authorize with traceparent", http.MethodPost, authz.PathAuthorize, `{"action":"orders:delete"}`, withParent(bearer),
			http.StatusOK, "POST " + authz.PathAuthorize, []string{engine.SpanVerifyToken, engine.SpanEvaluate}, "deny"},
		{"validate-token", http.MethodPost, authz.PathValidateToken, `{}`, bearer,
			http.StatusOK, "POST " + authz.PathValidateToken, []string{engine.SpanVerifyToken}, ""},
		{"nginx check", http.MethodGet, envoy.CheckPath, "", nginx,
			http.StatusForbidden, "GET " + envoy.CheckPath, []string{engine.SpanVerifyToken, engine.SpanEvaluate}, "deny"},
		{"nginx check with traceparent", http.MethodGet, envoy.CheckPath, "", withParent(nginx),
			http.StatusForbidden, "GET " + envoy.CheckPath, []string{engine.SpanVerifyToken, engine.SpanEvaluate}, "deny"},
		{"envoy http_service check", http.MethodGet, envoy.EnvoyCheckPrefix + "/orders/7", "", bearer,
			http.StatusOK, "GET " + envoy.EnvoyCheckPrefix + "/", []string{engine.SpanVerifyToken, engine.SpanEvaluate}, "allow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spans := openStream(t, ls.running, live.PathSpans, nil)
			if got := sendHTTP(t, ls.running, tt.method, tt.path, tt.body, tt.header); got != tt.status {
				t.Fatalf("%s %s = %d, want %d", tt.method, tt.path, got, tt.status)
			}
			// The server span ends last.
			byName := map[string]map[string]any{}
			for byName[tt.server] == nil {
				sp := spans.next(t)
				byName[sp["name"].(string)] = sp
			}
			server := byName[tt.server]
			if server["kind"] != "server" || server["service"] != "svc-sidecar" || attr(server, "url.path") != tt.path {
				t.Errorf("server span = %v, want a server span of svc-sidecar for its path", server)
			}
			if tt.header.Get("Traceparent") != "" {
				if server["trace_id"] != callerTraceID || server["parent_id"] != callerSpanID {
					t.Errorf("server span = %v, want it in trace %s under the caller's span %s", server, callerTraceID, callerSpanID)
				}
			} else if server["parent_id"] != nil {
				t.Errorf("server span = %v, want the root of its trace", server)
			}
			for _, name := range tt.spans {
				sp := byName[name]
				if sp == nil || sp["trace_id"] != server["trace_id"] || sp["parent_id"] != server["span_id"] {
					t.Errorf("%s = %v, want a child of the server span %v", name, sp, server["span_id"])
				}
			}
			if eval := byName[engine.SpanEvaluate]; tt.result != "" && attr(eval, engine.AttrResult) != tt.result {
				t.Errorf("policy.evaluate = %v, want result %s", eval, tt.result)
			}
			if len(byName) != len(tt.spans)+1 {
				t.Errorf("spans = %v, want the server span and %v only", byName, tt.spans)
			}
			spans.close()
		})
	}

	// Probes, admin reads and streams are no decision: no span.
	spans := openStream(t, ls.running, live.PathSpans, nil)
	for _, p := range []string{PathHealthz, PathStatus, PathMetrics} {
		if status, _ := get(t, ls.running, p); status != http.StatusOK {
			t.Fatalf("GET %s = %d", p, status)
		}
	}
	spans.quiet(t, 300*time.Millisecond)
}

// With nobody tailing traces no span is recorded, yet the decision's log
// record still names the caller's trace.
func TestHTTPDecisionKeepsTheCallersTraceUnwatched(t *testing.T) {
	idp := newTestIdP(t)
	ls := startLiveSidecar(t, testConfig(idp))
	viewer := idp.token(t, "u-viewer", testTenant, "viewer")
	logs := openStream(t, ls.running, live.PathLogs, url.Values{"filter": {"action=orders:read"}})
	decisions := openStream(t, ls.running, live.PathDecisions, nil)
	if ls.deps.Telemetry.SpansRecorded() {
		t.Fatal("spans are recorded while nobody tails traces and no endpoint is set")
	}
	h := http.Header{"Authorization": {"Bearer " + viewer}, "Traceparent": {traceparent},
		"X-Original-Uri": {"/orders/7"}, "X_svc_method": {"GET"}}
	if got := sendHTTP(t, ls.running, http.MethodGet, envoy.CheckPath, "", h); got != http.StatusOK {
		t.Fatalf("GET /check = %d", got)
	}
	if rec := logs.next(t); rec["trace_id"] != callerTraceID {
		t.Errorf("decision log record = %v, want trace_id %s", rec, callerTraceID)
	}
	if rec := decisions.next(t); rec["trace_id"] != callerTraceID {
		t.Errorf("decision (audit record) = %v, want trace_id %s", rec, callerTraceID)
	}
	if n := ls.deps.Telemetry.Spans().Stats(); n.Published != 0 {
		t.Errorf("span feed stats = %+v, want no span recorded", n)
	}
}
