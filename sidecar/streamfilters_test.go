package sidecar

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/sidecar/live"
)

func TestStreamsServerSentEvents(t *testing.T) {
	idp := newTestIdP(t)
	ls := startLiveSidecar(t, testConfig(idp))
	conn := dial(t, ls.GRPCAddr())
	viewer := idp.token(t, "u-viewer", testTenant, "viewer")
	for _, tt := range []struct{ name, query, accept string }{
		{"Accept header", "", "text/event-stream"},
		{"format parameter", "?format=sse", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ls.HTTPAddr().String()+live.PathDecisions+tt.query, nil)
			if tt.accept != "" {
				req.Header.Set("Accept", tt.accept)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("GET = %d %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			testkit.Eventually(t, "the stream is watched", ls.hub.Observing)
			allowed(t, conn, viewer, "/orders/5")
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			var event string
			for sc.Scan() {
				line := sc.Text()
				if e, ok := strings.CutPrefix(line, "event: "); ok {
					event = e
					continue
				}
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok {
					continue
				}
				var d map[string]any
				if err := json.Unmarshal([]byte(data), &d); err != nil {
					t.Fatalf("data line %q: %v", line, err)
				}
				if event != "decision" || d["action"] != "orders:read" || d["allow"] != true {
					t.Errorf("event %q data %v, want the allowed orders:read decision", event, d)
				}
				return
			}
			t.Fatalf("the stream ended without an event: %v", sc.Err())
		})
	}
}

func TestStreamsFilterByServiceAndTraceID(t *testing.T) {
	idp := newTestIdP(t)
	ls := startLiveSidecar(t, testConfig(idp))
	viewer := idp.token(t, "u-viewer", testTenant, "viewer")
	bearer := http.Header{"Authorization": {"Bearer " + viewer}}

	// A span watcher for each filter; svc-sidecar is the default service.name.
	ours := openStream(t, ls.running, live.PathSpans, url.Values{"service": {"svc-sidecar"}})
	other := openStream(t, ls.running, live.PathSpans, url.Values{"service": {"orders"}})
	spans := openStream(t, ls.running, live.PathSpans, url.Values{"trace_id": {strings.ToUpper(callerTraceID)}})
	logs := openStream(t, ls.running, live.PathLogs, url.Values{"trace_id": {callerTraceID}})
	decisions := openStream(t, ls.running, live.PathDecisions, url.Values{"trace_id": {callerTraceID}})

	// One decision outside the trace, then one in it.
	if got := sendHTTP(t, ls.running, http.MethodPost, "/v1/authorize", `{"action":"orders:read"}`, bearer); got != http.StatusOK {
		t.Fatalf("authorize = %d", got)
	}
	h := bearer.Clone()
	h.Set("Traceparent", traceparent)
	if got := sendHTTP(t, ls.running, http.MethodPost, "/v1/authorize", `{"action":"orders:delete"}`, h); got != http.StatusOK {
		t.Fatalf("authorize = %d", got)
	}

	if sp := ours.next(t); sp["service"] != "svc-sidecar" {
		t.Errorf("service=svc-sidecar gave %v", sp)
	}
	for range 3 {
		if sp := spans.next(t); sp["trace_id"] != callerTraceID {
			t.Errorf("trace_id filter gave a span of another trace: %v", sp)
		}
	}
	if rec := logs.next(t); rec["trace_id"] != callerTraceID || attr(rec, "action") != "orders:delete" {
		t.Errorf("trace_id filter on logs gave %v", rec)
	}
	if d := decisions.next(t); d["trace_id"] != callerTraceID || d["action"] != "orders:delete" {
		t.Errorf("trace_id filter on decisions gave %v", d)
	}
	other.quiet(t, 300*time.Millisecond)
	spans.quiet(t, 10*time.Millisecond)
	logs.quiet(t, 10*time.Millisecond)
}
