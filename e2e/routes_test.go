package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
)

// freePlanRoutesConfig is a tenant on the free plan behind the route of
// svc.example.toml that names the plan-gated export.
const freePlanRoutesConfig = `
[sdk]
tenant_id = "acme"
fail_mode = "closed"

[tenants.acme]
plan = "free"

[[sidecar.routes]]
path = "/api/reports/{id}/export"
methods = ["POST"]
resource = "reports"
action = "reports:export"
`

// TestRouteSpellingsOfTheBinary sends a free-plan editor's export under
// the spellings Express, ASP.NET Core and Rails serve as the export route
// to a running sidecar's Envoy Check and /check: each is the plan-gated
// reports:export, never the default mapping's api:create, which the
// editor may do. With envoy.routes_case_sensitive, a spelling in another
// case is refused.
func TestRouteSpellingsOfTheBinary(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	editor := k.token(t, "u-editor", "acme", "editor")
	env := map[string]string{"SVC_JWKS_URL": k.jwks.URL}
	folding := harness.StartSidecar(t, harness.SidecarOptions{Config: freePlanRoutesConfig, Env: env})
	strictEnv := map[string]string{"SVC_JWKS_URL": k.jwks.URL, "SVC_ENVOY_ROUTES_CASE_SENSITIVE": "true"}
	strict := harness.StartSidecar(t, harness.SidecarOptions{Config: freePlanRoutesConfig, Env: strictEnv})

	const planDenied, allowed = "plan-required: enterprise", "allowed"
	tests := []struct {
		name string
		s    *harness.Sidecar
		path string
		want string // planDenied, allowed, or a reason code
	}{
		{"exact", folding, "/api/reports/1/export", planDenied},
		{"capitalized", folding, "/api/reports/1/Export", planDenied},
		{"upper case", folding, "/api/reports/1/EXPORT", planDenied},
		{"upper-case prefix", folding, "/API/Reports/1/export", planDenied},
		{"format suffix", folding, "/api/reports/1/export.json", planDenied},
		{"format suffix in upper case", folding, "/api/reports/1/Export.CSV", planDenied},
		// The editor may create under /api: the denials above are the
		// route's, not a blanket refusal.
		{"another word is the default mapping", folding, "/api/reports/1/exports", allowed},
		{"case-sensitive: exact", strict, "/api/reports/1/export", planDenied},
		{"case-sensitive: format suffix", strict, "/api/reports/1/export.json", planDenied},
		{"case-sensitive: near miss refused", strict, "/api/reports/1/Export", "path-invalid"},
		{"case-sensitive: upper case refused", strict, "/api/reports/1/EXPORT", "path-invalid"},
	}
	for _, tc := range tests {
		t.Run("envoy "+tc.name, func(t *testing.T) {
			r := envoyCheck(t, tc.s, "POST", tc.path, editor, nil)
			checkRouteOutcome(t, r.status, r.body, tc.want)
		})
		t.Run("check "+tc.name, func(t *testing.T) {
			status, body := forwardAuthCheck(t, tc.s, "POST", tc.path, editor)
			checkRouteOutcome(t, status, body, tc.want)
		})
	}
}

func checkRouteOutcome(t *testing.T, status int, body, want string) {
	t.Helper()
	switch want {
	case "allowed":
		if status != http.StatusOK {
			t.Errorf("status %d body %s, want 200", status, body)
		}
	case "plan-required: enterprise":
		if status != http.StatusForbidden || !hasReason(parseDeny(t, body).DenyReasons, want) {
			t.Errorf("status %d body %s, want 403 %s", status, body, want)
		}
	default:
		if status != http.StatusBadRequest || !strings.Contains(body, `"reason":"`+want+`"`) {
			t.Errorf("status %d body %s, want 400 %s", status, body, want)
		}
	}
}
