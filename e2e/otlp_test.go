package e2e

import (
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

// otlpService is the service name the OTLP tests give the sidecar.
const otlpService = "orders-authz-e2e"

// startOTLPSidecar starts a sidecar named otlpService that exports to rcv,
// with env added to its environment.
func startOTLPSidecar(t *testing.T, rcv *harness.OTLPReceiver, env map[string]string) (*keyring, *harness.Sidecar) {
	t.Helper()
	e := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint,
		"SVC_SERVICE_NAME":            otlpService,
	}
	maps.Copy(e, env)
	k := newKeyring(t)
	return k, startSidecar(t, k, e)
}

// TestOTLPTraces starts the sidecar exporting to an in-test OTLP receiver
// and checks the spans of a few decisions after SIGTERM, which must flush
// the batch.
func TestOTLPTraces(t *testing.T) {
	t.Parallel()
	rcv := harness.StartOTLPReceiver(t)
	k, s := startOTLPSidecar(t, rcv, nil)

	allowed := envoyCheck(t, s, "GET", "/orders/42", k.token(t, "alice", "acme", "viewer"), nil)
	if allowed.status != http.StatusOK {
		t.Fatalf("allowed Check: status %d; body %s", allowed.status, allowed.body)
	}
	denied := envoyCheck(t, s, "GET", "/orders/42", k.token(t, "mallory", "globex", "admin"), nil)
	if denied.status != http.StatusForbidden {
		t.Fatalf("cross-tenant Check: status %d; body %s", denied.status, denied.body)
	}
	expiredClaims := harness.Claims("alice", "acme", "viewer")
	expiredClaims["exp"] = time.Now().Add(-time.Hour).Unix()
	if r := envoyCheck(t, s, "GET", "/orders/42", k.rsa.Token(t, expiredClaims), nil); r.status != http.StatusUnauthorized {
		t.Fatalf("expired Check: status %d; body %s", r.status, r.body)
	}
	// nginx's auth_request passing on the client's trace context.
	const callerTrace, callerSpan = "5b8aa5a2d2c872e8321cf37308d69df2", "051581bf3cb55c13"
	if st := httpDecision(t, s, http.MethodGet, "/check", "", map[string]string{
		"Authorization": "Bearer " + k.token(t, "alice", "acme", "viewer"), "X-Original-URI": "/orders/43",
		"X_Svc_Method": "GET", "traceparent": "00-" + callerTrace + "-" + callerSpan + "-01",
	}); st != http.StatusOK {
		t.Fatalf("HTTP check: status %d", st)
	}
	allowID := allowed.headers["x-svc-decision-id"]
	denyID := parseDeny(t, denied.body).DecisionID

	s.Stop(t)

	spans := rcv.Spans()
	if len(spans) == 0 {
		t.Fatalf("no span received after SIGTERM (metrics exports: %d)", rcv.MetricsExports())
	}
	for _, sp := range spans {
		if got := sp.Resource["service.name"]; got != otlpService {
			t.Errorf("span %q: resource service.name = %q, want %q", sp.Name, got, otlpService)
		}
	}

	verify := rcv.SpansNamed("auth.verify_token")
	eval := rcv.SpansNamed("policy.evaluate")
	byReason := func(spans []harness.Span, reason string) *harness.Span {
		for i := range spans {
			if spans[i].Attrs["svc.reason"] == reason {
				return &spans[i]
			}
		}
		return nil
	}
	findID := func(spans []harness.Span, id string) *harness.Span {
		for i := range spans {
			if spans[i].Attrs["svc.decision_id"] == id {
				return &spans[i]
			}
		}
		return nil
	}

	t.Run("auth.verify_token", func(t *testing.T) {
		if len(verify) < 3 {
			t.Fatalf("%d auth.verify_token spans, want one per Check (3): %+v", len(verify), verify)
		}
		ok := byReason(verify, "ok")
		expired := byReason(verify, "token-expired")
		if ok == nil || expired == nil {
			t.Fatalf("want auth.verify_token spans with svc.reason ok and token-expired; got %+v", verify)
		}
		for _, sp := range []*harness.Span{ok, expired} {
			for _, attr := range []string{"svc.result", "svc.reason"} {
				if sp.Attrs[attr] == "" {
					t.Errorf("span %s (reason %s) lacks %s: %v", sp.Name, sp.Attrs["svc.reason"], attr, sp.Attrs)
				}
			}
		}
		// The tenant of a rejected token is unknown: only a verified one
		// names it.
		if ok.Attrs["svc.tenant"] != "acme" {
			t.Errorf("svc.tenant = %q, want acme", ok.Attrs["svc.tenant"])
		}
		if ok.Attrs["svc.result"] == expired.Attrs["svc.result"] {
			t.Errorf("svc.result %q is the same for an accepted and an expired token", ok.Attrs["svc.result"])
		}
		for _, sp := range verify {
			for _, v := range sp.Attrs {
				if strings.Count(v, ".") == 2 && len(v) > 100 {
					t.Errorf("span attribute looks like a token: %s", v[:20])
				}
			}
		}
	})

	t.Run("policy.evaluate", func(t *testing.T) {
		allow := findID(eval, allowID)
		deny := findID(eval, denyID)
		if allow == nil || deny == nil {
			t.Fatalf("want policy.evaluate spans with svc.decision_id %q and %q; got %+v", allowID, denyID, eval)
		}
		for _, sp := range []*harness.Span{allow, deny} {
			for _, attr := range []string{"svc.tenant", "svc.action", "svc.result", "svc.reason", "svc.decision_id"} {
				if sp.Attrs[attr] == "" {
					t.Errorf("policy.evaluate %s lacks %s: %v", sp.Attrs["svc.decision_id"], attr, sp.Attrs)
				}
			}
			if sp.Attrs["svc.action"] != "orders:read" {
				t.Errorf("svc.action = %q, want orders:read", sp.Attrs["svc.action"])
			}
		}
		if allow.Attrs["svc.tenant"] != "acme" {
			t.Errorf("svc.tenant = %q, want acme", allow.Attrs["svc.tenant"])
		}
		if allow.Attrs["svc.reason"] != "policy-allow" || deny.Attrs["svc.reason"] != "policy-deny" {
			t.Errorf("svc.reason = %q / %q, want policy-allow / policy-deny", allow.Attrs["svc.reason"], deny.Attrs["svc.reason"])
		}
		if allow.Attrs["svc.result"] == deny.Attrs["svc.result"] {
			t.Errorf("svc.result %q is the same for allow and deny", allow.Attrs["svc.result"])
		}
		if !strings.Contains(deny.Attrs["svc.deny_reasons"], "tenant-mismatch") {
			t.Errorf("svc.deny_reasons = %q, want tenant-mismatch", deny.Attrs["svc.deny_reasons"])
		}
		// The decision spans hang under the gRPC server span of Check.
		var server *harness.Span
		for i := range spans {
			if spans[i].TraceID == allow.TraceID && strings.Contains(spans[i].Name, "Authorization/Check") {
				server = &spans[i]
			}
		}
		if server == nil {
			t.Errorf("no gRPC server span of Check in trace %s", allow.TraceID)
		}
		if v := findVerifyInTrace(verify, allow.TraceID); v == nil {
			t.Errorf("auth.verify_token and policy.evaluate of one Check are in different traces")
		}
	})

	t.Run("HTTP check", func(t *testing.T) {
		// One trace, the caller's: the HTTP server span under the caller's
		// span, the decision's spans under the server span.
		var server *harness.Span
		children := map[string]bool{}
		for i := range spans {
			sp := &spans[i]
			if sp.TraceID != callerTrace {
				continue
			}
			if sp.Name == "GET /check" {
				server = sp
			}
		}
		if server == nil || server.ParentID != callerSpan {
			t.Fatalf("no server span GET /check under the caller's span %s in trace %s: %+v", callerSpan, callerTrace, server)
		}
		for _, sp := range spans {
			if sp.TraceID == callerTrace && sp.ParentID == server.SpanID {
				children[sp.Name] = true
			}
		}
		if !children["auth.verify_token"] || !children["policy.evaluate"] {
			t.Errorf("children of the HTTP server span: %v, want auth.verify_token and policy.evaluate", children)
		}
	})
}

func findVerifyInTrace(spans []harness.Span, traceID string) *harness.Span {
	for i := range spans {
		if spans[i].TraceID == traceID {
			return &spans[i]
		}
	}
	return nil
}

// TestOTLPFlushedOnRestart: core sidecar restart flushes the OTel batch
// before the process image is replaced. The batch timer is set to an
// hour, so the spans of a decision made just before the restart reach
// the receiver only through that flush.
func TestOTLPFlushedOnRestart(t *testing.T) {
	rcv := harness.StartOTLPReceiver(t)
	k := newKeyring(t)
	s := startSidecar(t, k, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint,
		"OTEL_BSP_SCHEDULE_DELAY":     "3600000",
	})
	allowed := envoyCheck(t, s, "GET", "/orders/42", k.token(t, "alice", "acme", "viewer"), nil)
	if allowed.status != http.StatusOK {
		t.Fatalf("Check: status %d; body %s", allowed.status, allowed.body)
	}
	id := allowed.headers["x-svc-decision-id"]
	if n := len(rcv.SpansNamed("policy.evaluate")); n != 0 {
		t.Fatalf("%d policy.evaluate spans exported before the restart; the batch timer is not holding them", n)
	}

	if code, stdout, stderr := runCoreAt(t, s, "sidecar", "restart", "--drain-timeout", "5"); code != 0 {
		t.Fatalf("core sidecar restart: exit %d %q %s", code, stdout, stderr)
	}
	// The old image flushed before exec; allow the receiver a moment to
	// record what it was sent.
	testkit.Eventually(t, "the decision's span from the flush at restart", func() bool {
		for _, sp := range rcv.SpansNamed("policy.evaluate") {
			if sp.Attrs["svc.decision_id"] == id {
				return true
			}
		}
		return false
	})
}
