package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
)

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

	check := func(t *testing.T, headers map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, s.URL("/check"), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+viewer)
		for n, v := range headers {
			req.Header.Set(n, v)
		}
		status, h, body := harness.Do(t, req)
		if st, err := strconv.Atoi(h.Get("X-Svc-Status")); err == nil {
			status = st
		}
		return status, string(body)
	}
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
			return check(t, map[string]string{"X-Original-URI": "/orders/%2F1", "X_Svc_Method": "GET"})
		}, "path-invalid"},
		{"nginx path parameter", func(t *testing.T) (int, string) {
			return check(t, map[string]string{"X-Original-URI": "/orders/1;x", "X_Svc_Method": "GET"})
		}, "path-invalid"},
		{"nginx without X_Svc_Method", func(t *testing.T) (int, string) {
			return check(t, map[string]string{"X-Original-URI": "/orders/1"})
		}, "method-untrusted"},
		{"caddy method override", func(t *testing.T) (int, string) {
			return check(t, map[string]string{"X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "POST", "X-Http-Method-Override": "DELETE"})
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
