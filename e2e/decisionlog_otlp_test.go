package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

// TestDecisionLogOTLP ships decisions to an OTLP collector as log
// records: every decision id arrives, each record's body is the
// decision's JSON, and its trace id is that of the decision's spans, so
// that a collector can join the two.
func TestDecisionLogOTLP(t *testing.T) {
	t.Parallel()
	rcv := harness.StartOTLPReceiver(t)
	k, s := startOTLPSidecar(t, rcv, map[string]string{
		"SVC_DECISION_LOG_SINK":           "otlp",
		"SVC_DECISION_LOG_URL":            rcv.Endpoint,
		"SVC_DECISION_LOG_SPOOL_DIR":      t.TempDir(),
		"SVC_DECISION_LOG_FLUSH_INTERVAL": "100ms",
	})

	want := map[string]string{} // decision id → decision
	for range 3 {
		r := envoyCheck(t, s, "GET", "/orders/42", k.token(t, "alice", "acme", "viewer"), nil)
		if r.status != http.StatusOK {
			t.Fatalf("allowed Check: status %d; body %s", r.status, r.body)
		}
		want[r.headers["x-svc-decision-id"]] = "allow"
	}
	denied := envoyCheck(t, s, "GET", "/orders/42", k.token(t, "mallory", "globex", "admin"), nil)
	if denied.status != http.StatusForbidden {
		t.Fatalf("cross-tenant Check: status %d; body %s", denied.status, denied.body)
	}
	denyID := parseDeny(t, denied.body).DecisionID
	want[denyID] = "deny"
	expiredClaims := harness.Claims("alice", "acme", "viewer")
	expiredClaims["exp"] = time.Now().Add(-time.Hour).Unix()
	expired := envoyCheck(t, s, "GET", "/orders/42", k.rsa.Token(t, expiredClaims), nil)
	if expired.status != http.StatusUnauthorized {
		t.Fatalf("expired Check: status %d; body %s", expired.status, expired.body)
	}
	want[parseDeny(t, expired.body).DecisionID] = "deny"
	if len(want) != 5 {
		t.Fatalf("decision ids %v, want 5 distinct", want)
	}

	byID := func() map[string]harness.LogRecord {
		m := map[string]harness.LogRecord{}
		for _, l := range rcv.Logs() {
			m[l.Attrs["svc.decision_id"]] = l
		}
		return m
	}
	testkit.Eventually(t, "every decision received as a log record", func() bool {
		got := byID()
		for id := range want {
			if _, ok := got[id]; !ok {
				return false
			}
		}
		return true
	})
	s.Stop(t) // flushes the spans
	logs := byID()

	for id, decision := range want {
		l := logs[id]
		var body struct {
			DecisionID string          `json:"decision_id"`
			TraceID    string          `json:"trace_id"`
			Input      json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal([]byte(l.Body), &body); err != nil || body.DecisionID != id || len(body.Input) == 0 {
			t.Errorf("%s: body is not the decision's record with its input (%v): %s", id, err, l.Body)
		}
		if l.Attrs["svc.decision"] != decision || l.Attrs["svc.reason"] == "" {
			t.Errorf("%s: svc.decision %q, svc.reason %q; want %s and a reason", id, l.Attrs["svc.decision"], l.Attrs["svc.reason"], decision)
		}
		if l.Resource["service.name"] != otlpService || l.Severity != "INFO" || l.Time.IsZero() {
			t.Errorf("%s: service.name %q, severity %q, time %v; want %s, INFO and the decision's time",
				id, l.Resource["service.name"], l.Severity, l.Time, otlpService)
		}
		if l.TraceID == "" || l.TraceID != body.TraceID {
			t.Errorf("%s: log record trace id %q, want the record's %q", id, l.TraceID, body.TraceID)
		}
	}
	if l := logs[denyID]; l.Attrs["svc.tenant"] != "globex" || l.Attrs["svc.reason"] != "policy-deny" {
		t.Errorf("denied decision: svc.tenant %q, svc.reason %q; want globex, policy-deny", l.Attrs["svc.tenant"], l.Attrs["svc.reason"])
	}

	// The log record of a decision is in the trace of its spans, under
	// one of them.
	spans := rcv.Spans()
	for _, ev := range rcv.SpansNamed("policy.evaluate") {
		l, ok := logs[ev.Attrs["svc.decision_id"]]
		if !ok {
			continue
		}
		if l.TraceID != ev.TraceID {
			t.Errorf("decision %s: log record in trace %s, its policy.evaluate span in %s", ev.Attrs["svc.decision_id"], l.TraceID, ev.TraceID)
		}
		var under bool
		for _, sp := range spans {
			under = under || (sp.TraceID == l.TraceID && sp.SpanID == l.SpanID)
		}
		if !under {
			t.Errorf("decision %s: log record span id %q is none of the spans of trace %s", ev.Attrs["svc.decision_id"], l.SpanID, l.TraceID)
		}
		delete(want, ev.Attrs["svc.decision_id"])
	}
	for id, decision := range want {
		if decision == "allow" {
			t.Errorf("allowed decision %s has no policy.evaluate span to compare its log record with", id)
		}
	}
}
