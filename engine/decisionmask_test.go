package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/jsonmask"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/internal/testkit/natstest"
	"go.opentelemetry.io/otel/trace"
)

// decision_log.mask erases its pointers from the records shipped to
// NATS and from the audit log alike, and lists them in "erased"; the
// caller's bearer token, sent in a header too, reaches neither.
func TestDecisionLogMask(t *testing.T) {
	srv := natstest.Start(t)
	p := idptest.New(t)
	cfg := decisionLogConfig(t, p, srv.URL())
	cfg.DecisionLog.Mask = []string{"/input/request/headers/x-ssn", "/user_id", "/input/user/id"}
	mask, err := jsonmask.Parse(cfg.DecisionLog.Mask)
	if err != nil {
		t.Fatal(err)
	}
	var auditOut testkit.SyncBuffer
	lg := audit.New(&auditOut, audit.Options{Mask: mask})
	e := newEngine(t, cfg, engine.Deps{Audit: lg})
	tok := p.Token(t, claimsFor("acme", "viewer"))
	res, err := e.Decide(context.Background(), engine.Request{Credential: engine.BearerToken(tok),
		Input: engine.Input{Action: "orders:read", Resource: policy.Resource{Type: "orders", ID: "o-1"},
			Request: &policy.Request{Method: "GET", Path: "/orders/o-1", Headers: map[string]string{
				"authorization": "Bearer " + tok, "x-ssn": "123-45-6789", "accept": "application/json"}}}})
	if err != nil || !res.Allowed() {
		t.Fatalf("decision: %+v, %v", res.Decision, err)
	}
	testkit.Eventually(t, "the decision shipped", func() bool {
		st := e.Status().DecisionLog
		return st != nil && st.Shipped == 1
	})
	if err := lg.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := streamRecords(t, srv)[res.Decision.DecisionID]
	raw, _ := json.Marshal(rec)
	if rec == nil || strings.Contains(string(raw), tok) || strings.Contains(string(raw), "123-45-6789") {
		t.Fatalf("decision record: %s", raw)
	}
	in, _ := rec["input"].(map[string]any)
	user, _ := in["user"].(map[string]any)
	headers, _ := in["request"].(map[string]any)["headers"].(map[string]any)
	if _, ok := rec["user_id"]; ok || user["id"] != nil || user["tenant_id"] != "acme" || headers["accept"] != "application/json" || headers["x-ssn"] != nil {
		t.Errorf("decision record not masked as asked: %s", raw)
	}
	got, _ := rec["erased"].([]any)
	if want := []any{"/input/request/headers/x-ssn", "/user_id", "/input/user/id"}; !slices.Equal(got, want) {
		t.Errorf("decision record erased %v, want %v", got, want)
	}

	line := strings.TrimSpace(auditOut.String())
	var arec map[string]any
	if err := json.Unmarshal([]byte(line), &arec); err != nil {
		t.Fatalf("audit log %q: %v", line, err)
	}
	if _, ok := arec["user_id"]; ok || arec["decision_id"] != res.Decision.DecisionID || strings.Contains(line, tok) {
		t.Errorf("audit record: %s", line)
	}
	if got, _ := arec["erased"].([]any); !slices.Equal(got, []any{"/user_id"}) {
		t.Errorf("audit record erased %v, want only /user_id (it has no input)", got)
	}
}

// The live streams (core log tail, the decision stream) show records as
// the audit log writes them: masked. A dry-run session still gets the
// input it evaluates.
func TestDecisionLogMaskOnObservers(t *testing.T) {
	p := idptest.New(t)
	cfg := prodConfig(p.JWKSURL())
	cfg.DecisionLog.Mask = []string{"/user_id", "/resource/id"}
	o := &observer{watching: true}
	e := newEngine(t, cfg, engine.Deps{Observer: o})
	tok := p.Token(t, claimsFor("acme", "viewer"))
	if _, err := e.Authorize(context.Background(), tok, engine.Input{Action: "orders:read", Resource: policy.Resource{ID: "o-secret"}}); err != nil {
		t.Fatal(err)
	}
	if len(o.events) != 1 {
		t.Fatalf("%d events", len(o.events))
	}
	ev := o.events[0]
	if ev.Record.UserID != "" || ev.Record.Resource.ID != "" || ev.Record.Action != "orders:read" || ev.Record.DecisionID == "" || !ev.Record.Allow {
		t.Errorf("observed record not masked: %+v", ev.Record)
	}
	if ev.Input.Resource.ID != "o-secret" || ev.Input.User.ID == "" {
		t.Errorf("observed input %+v: dry-run sessions evaluate it whole", ev.Input)
	}
}

// With the decision log and the audit log on, each decision record is
// its audit line, the same members with the same names and values, plus
// "input": for allowed, denied and refused decisions, traced or not.
func TestDecisionRecordIsTheAuditRecord(t *testing.T) {
	srv := natstest.Start(t)
	p := idptest.New(t)
	cfg := decisionLogConfig(t, p, srv.URL())
	var auditOut testkit.SyncBuffer
	lg := audit.New(&auditOut, audit.Options{})
	e := newEngine(t, cfg, engine.Deps{Audit: lg})
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		Remote:  true,
	})
	traced := trace.ContextWithSpanContext(context.Background(), sc)
	viewer, admin := p.Token(t, claimsFor("acme", "viewer")), p.Token(t, claimsFor("acme", "admin"))
	var ids []string
	for _, ctx := range []context.Context{context.Background(), traced} {
		for _, c := range []struct{ tok, action string }{
			{viewer, "orders:read"}, {viewer, "orders:delete"}, {admin, "orders:delete"}, {"not-a-token", "orders:read"},
		} {
			res, err := e.Decide(ctx, engine.Request{Credential: engine.BearerToken(c.tok),
				Input: engine.Input{Action: c.action, Resource: policy.Resource{Type: "orders", ID: "o-1"}}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Decision.DecisionID)
		}
	}
	testkit.Eventually(t, "every decision shipped", func() bool {
		st := e.Status().DecisionLog
		return st != nil && st.Shipped == int64(len(ids))
	})
	if err := lg.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	records := streamRecords(t, srv)
	lines := strings.Split(strings.TrimSpace(auditOut.String()), "\n")
	if len(lines) != len(ids) {
		t.Fatalf("%d audit lines for %d decisions:\n%s", len(lines), len(ids), auditOut.String())
	}
	for i, line := range lines {
		var got map[string]any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("audit line %d %q: %v", i, line, err)
		}
		want := records[ids[i]]
		if want == nil || want["input"] == nil {
			t.Fatalf("decision %s: record %v", ids[i], want)
		}
		delete(want, "input")
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if string(g) != string(w) {
			t.Errorf("decision %d: audit record\n%s\ndecision record without input\n%s", i, g, w)
		}
	}
	if !strings.Contains(lines[len(lines)-1], `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"`) {
		t.Errorf("traced audit record without the span's ids: %s", lines[len(lines)-1])
	}
}
