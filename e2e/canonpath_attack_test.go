package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
)

// freePlanConfig is a tenant on the free plan, with no route table: the
// shipped plan-gates policy alone decides which paths the plan includes.
const freePlanConfig = `
[sdk]
tenant_id = "acme"
fail_mode = "closed"

[tenants.acme]
plan = "free"
`

// TestCanonicalPathAttack attacks the shipped plan-gates example policy
// as a free-plan editor would: the gated routes (reports export, SSO,
// creating webhooks) under the spellings an upstream router serves as
// the same route (another letter case, a format suffix, a
// percent-escape, repeated slashes, a dot segment), through the three
// doors a request reaches the policy by: Envoy's gRPC Check, the HTTP
// check as Caddy's forward_auth sends it, and POST /v1/authorize with a
// request. Every spelling is refused with the plan the route needs; the
// routes the plan includes stay allowed, "/api/releases/1.2.3" among
// them, whose last segment is not a format.
func TestCanonicalPathAttack(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	editor := k.token(t, "u-editor", "acme", "editor")
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: freePlanConfig, Env: map[string]string{
		"SVC_JWKS_URL":   k.jwks.URL,
		"SVC_POLICY_DIR": filepath.Join(harness.ModuleRoot(t), "examples", "policies", "plan-gates"),
	}})

	const enterprise, team, allowed = "plan-required: enterprise", "plan-required: team", ""
	tests := []struct {
		method, path string
		want         string // a deny reason, or allowed
	}{
		{"GET", "/api/reports/export", enterprise},
		{"GET", "/api/reports/Export", enterprise},
		{"GET", "/API/reports/export", enterprise},
		{"GET", "/api/reports/export.json", enterprise},
		{"GET", "/api/reports/export.CSV", enterprise},
		{"GET", "/api/reports/%65xport", enterprise},
		{"GET", "//api//reports/export", enterprise},
		{"GET", "/api/x/../reports/export", enterprise},
		{"GET", "/api/reports/export/q3.json", enterprise},
		{"POST", "/api/webhooks", team},
		{"POST", "/api/Webhooks", team},
		{"POST", "/api/webhooks.json", team},
		{"GET", "/api/sso", enterprise},
		{"GET", "/api/SSO", enterprise},
		{"GET", "/api/Sso/login.html", enterprise},
		{"GET", "/api/orders/1", allowed},
		{"GET", "/api/Webhooks", allowed},
		{"GET", "/api/reports/exports-list", allowed},
		{"GET", "/api/releases/1.2.3", allowed},
	}
	for _, tc := range tests {
		name := tc.method + " " + tc.path
		t.Run("envoy "+name, func(t *testing.T) {
			r := envoyCheck(t, s, tc.method, tc.path, editor, nil)
			checkPlanOutcome(t, r.status, r.body, tc.want)
		})
		t.Run("check "+name, func(t *testing.T) {
			status, body := forwardAuthCheck(t, s, tc.method, tc.path, editor)
			checkPlanOutcome(t, status, body, tc.want)
		})
		t.Run("authorize "+name, func(t *testing.T) {
			body, err := json.Marshal(map[string]any{
				"action":  "api:access",
				"request": map[string]string{"method": tc.method, "path": tc.path},
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := authorizeAllowed(t, s, editor, string(body)); got != (tc.want == allowed) {
				t.Errorf("POST /v1/authorize allowed = %v, want %v", got, tc.want == allowed)
			}
		})
	}
}

// checkPlanOutcome checks a proxy's answer: 200 when want is "", else
// 403 with the reason want.
func checkPlanOutcome(t *testing.T, status int, body, want string) {
	t.Helper()
	if want == "" {
		if status != http.StatusOK {
			t.Errorf("status %d body %s, want 200", status, body)
		}
		return
	}
	if status != http.StatusForbidden || !hasReason(parseDeny(t, body).DenyReasons, want) {
		t.Errorf("status %d body %s, want 403 %s", status, body, want)
	}
}
