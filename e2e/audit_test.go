package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/internal/harness"
)

// TestAuditLog checks the audit file: one JSON line per decision, asked
// through Envoy Check, gRPC Authorize and HTTP authorize, with the fields
// that tie it to the answer the caller got.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	s := startSidecar(t, k, map[string]string{"SVC_AUDIT_DESTINATION": path})

	// 1. Allowed through Envoy, with a resource id from the extensions.
	allowed := envoyCheck(t, s, "GET", "/orders/42", k.token(t, "alice", "acme", "viewer"),
		map[string]string{"svc.resource_id": "42"})
	if allowed.status != http.StatusOK {
		t.Fatalf("Check: status %d; body %s", allowed.status, allowed.body)
	}
	// 2. Denied by the policy through gRPC Authorize.
	denied := authorize(t, s, &authzv1.AuthorizeRequest{
		Token:    k.token(t, "mallory", "globex", "admin"),
		Action:   "invoices:delete",
		Resource: &authzv1.Resource{Id: "inv-9"},
	})
	if denied.GetAllowed() || denied.GetReason() != "policy-deny" || denied.GetDecisionId() == "" {
		t.Fatalf("Authorize = %+v, want a policy denial with a decision id", denied)
	}
	// 3. An expired token through the HTTP API.
	expiredClaims := harness.Claims("alice", "acme", "viewer")
	expiredClaims["exp"] = time.Now().Add(-time.Hour).Unix()
	if status, h, body := harness.Send(t, http.MethodPost, s.URL("/v1/authorize"), `{"action":"orders:read"}`,
		map[string]string{"Authorization": harness.Bearer(k.rsa.Token(t, expiredClaims)), "Content-Type": "application/json"}); status != http.StatusOK || !strings.Contains(string(body), "token-expired") {
		t.Fatalf("POST /v1/authorize with an expired token: %s", harness.Describe(status, h, body))
	}

	// SIGTERM drains the audit queue.
	s.Stop(t)
	recs := harness.ReadJSONLines(t, path)
	if len(recs) != 3 {
		t.Fatalf("audit log holds %d records, want 3 (one per decision):\n%v", len(recs), recs)
	}

	want := []map[string]any{
		{"decision_id": allowed.headers["x-svc-decision-id"], "tenant": "acme", "user_id": "alice",
			"action": "orders:read", "allow": true, "reason": "policy-allow"},
		{"decision_id": denied.GetDecisionId(), "tenant": "globex", "user_id": "mallory",
			"action": "invoices:delete", "allow": false, "reason": "policy-deny"},
		{"action": "orders:read", "allow": false, "reason": "token-expired"},
	}
	for i, w := range want {
		rec := recs[i]
		for _, field := range []string{"decision_id", "tenant", "user_id", "action", "allow", "deny_reasons", "reason"} {
			if _, ok := rec[field]; !ok {
				t.Errorf("record %d lacks %q: %v", i+1, field, rec)
			}
		}
		for field, v := range w {
			if rec[field] != v {
				t.Errorf("record %d: %s = %v, want %v", i+1, field, rec[field], v)
			}
		}
	}
	if reasons, _ := recs[1]["deny_reasons"].([]any); !containsReason(reasons, "tenant-mismatch") {
		t.Errorf("record 2 deny_reasons = %v, want tenant-mismatch", recs[1]["deny_reasons"])
	}
	if reasons, _ := recs[0]["deny_reasons"].([]any); len(reasons) != 0 {
		t.Errorf("record 1 (allowed) deny_reasons = %v, want none", recs[0]["deny_reasons"])
	}
	if res, _ := recs[0]["resource"].(map[string]any); res == nil || res["id"] != "42" {
		t.Errorf("record 1 resource = %v, want id 42 from svc.resource_id", recs[0]["resource"])
	}
	if res, _ := recs[1]["resource"].(map[string]any); res == nil || res["id"] != "inv-9" {
		t.Errorf("record 2 resource = %v, want id inv-9", recs[1]["resource"])
	}
}

func containsReason(reasons []any, want string) bool {
	for _, r := range reasons {
		if s, _ := r.(string); s == want {
			return true
		}
	}
	return false
}

// TestAuditLogRefusals: a check refused before it could be decided (a
// path without a single meaning, a method the check cannot trust) is
// answered with a decision id, and the audit log holds a record under
// that id with the refusal's reason, as for every other answer.
func TestAuditLogRefusals(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	s := startSidecar(t, k, map[string]string{"SVC_AUDIT_DESTINATION": path})
	viewer := k.token(t, "u-viewer", "acme", "viewer")

	want := map[string]string{} // decision id → reason
	for _, tc := range []struct {
		name   string
		answer func(t *testing.T) (int, string)
		reason string
	}{
		{"envoy encoded slash", func(t *testing.T) (int, string) {
			r := envoyCheck(t, s, "GET", "/orders/%2F1", viewer, nil)
			return r.status, r.body
		}, "path-invalid"},
		{"envoy method override", func(t *testing.T) (int, string) {
			r := envoyCheckHeaders(t, s, "POST", "/orders/1", map[string]string{
				"authorization": "Bearer " + viewer, "x-http-method-override": "DELETE"}, nil)
			return r.status, r.body
		}, "input-invalid"},
		{"nginx encoded slash", func(t *testing.T) (int, string) {
			return proxyCheck(t, s, viewer, map[string]string{"X-Original-URI": "/orders/%2F1", "X_Svc_Method": "GET"})
		}, "path-invalid"},
		{"nginx path parameter", func(t *testing.T) (int, string) {
			return proxyCheck(t, s, viewer, map[string]string{"X-Original-URI": "/orders/1;x", "X_Svc_Method": "GET"})
		}, "path-invalid"},
		{"nginx without X_Svc_Method", func(t *testing.T) (int, string) {
			return proxyCheck(t, s, viewer, map[string]string{"X-Original-URI": "/orders/1"})
		}, "method-untrusted"},
		{"caddy method override", func(t *testing.T) (int, string) {
			return proxyCheck(t, s, viewer, map[string]string{"X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "POST", "X-Http-Method-Override": "DELETE"})
		}, "input-invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := tc.answer(t)
			var deny struct {
				Reason     string `json:"reason"`
				DecisionID string `json:"decision_id"`
			}
			if err := json.Unmarshal([]byte(body), &deny); err != nil || status != http.StatusBadRequest ||
				deny.Reason != tc.reason || deny.DecisionID == "" {
				t.Fatalf("status %d body %s, want 400 %s with a decision id", status, body, tc.reason)
			}
			want[deny.DecisionID] = tc.reason
		})
	}

	// SIGTERM drains the audit queue.
	s.Stop(t)
	for _, rec := range harness.ReadJSONLines(t, path) {
		id, _ := rec["decision_id"].(string)
		if r, ok := want[id]; ok {
			if rec["reason"] != r || rec["allow"] != false {
				t.Errorf("record %v, want reason %s, denied", rec, r)
			}
			delete(want, id)
		}
	}
	for id, r := range want {
		t.Errorf("no audit record for the %s answer %s", r, id)
	}
}
