package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

// capturePolicy lets a clerk read and delete anything of its tenant,
// except a frozen order (id "42"), a locked item (id "ABC", captured by
// the route /items/{id}) and the archive, on which no action is allowed:
// deny rules keyed on an id and on a resource name, as operators write
// them. Every update is refused with a reason that spells out the
// mapping ("mapped <action> id=<id> format=<format>"), so a PUT shows
// what the sidecar made of a path.
const capturePolicy = `package svc.authz

default allow := false

allow if {
	"clerk" in input.user.roles
	input.user.tenant_id == input.resource.tenant
	[_, verb] := split(input.action, ":")
	verb in {"read", "delete"}
	count(refusals) == 0
}

refusals contains "order-frozen" if {
	input.resource.type == "orders"
	input.resource.id == "42"
}

refusals contains "item-locked" if {
	input.resource.type == "items"
	input.resource.id == "ABC"
}

refusals contains "archive-closed" if input.resource.type == "archive"

refusals contains reason if {
	endswith(input.action, ":update")
	reason := sprintf("mapped %s id=%s format=%s", [input.action, input.resource.id, input.request.format])
}

deny_reasons := set() if {
	allow == true
} else := refusals if {
	count(refusals) > 0
} else := {"not-permitted"}
`

// captureConfig routes /items/{id}; orders and the archive have no
// route and go by the default mapping.
const captureConfig = `
[sdk]
tenant_id = "acme"
fail_mode = "closed"

[[sidecar.routes]]
path = "/items/{id}"
resource = "items"
`

// TestCaptureAttack attacks deny rules keyed on an id or a resource name
// (issue 28) as a client would, through Envoy's gRPC Check and the HTTP
// check as Caddy's forward_auth sends it: a format suffix on the id
// ("/orders/42.json", "/items/ABC.json"), in any letter case, and the
// resource segment in another case ("/Orders/42", "/ARCHIVE/1.json") are
// the frozen order, the locked item and the archive, as an upstream that
// folds case and serves formats treats them. A route capture and the
// default mapping cut the same suffixes; a captured or default id keeps
// its case ("/items/abc" is item "abc", not the locked "ABC").
//
// envoy.format_suffixes replaces the list of suffixes cut: with
// ["json", "pdf"], "/orders/42.pdf" is order 42 while "/orders/42.csv"
// is order "42.csv".
//
// envoy.routes_case_sensitive = true is the operator's explicit
// statement that every upstream routes case-sensitively, so "/Archive/1"
// is another resource ("Archive") than "/archive/1" and the policy's
// "archive" rule does not apply to it: that is the setting's documented
// meaning, asserted here so that a change of it is seen. The suffix is
// still cut, and a route's near miss in case is refused, not mapped.
func TestCaptureAttack(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	clerk := k.token(t, "u-clerk", "acme", "clerk")
	dir := t.TempDir()
	testkit.WriteFile(t, filepath.Join(dir, "authz.rego"), []byte(capturePolicy))
	start := func(config string) *harness.Sidecar {
		return harness.StartSidecar(t, harness.SidecarOptions{Config: config, Env: map[string]string{
			"SVC_JWKS_URL":   k.jwks.URL,
			"SVC_POLICY_DIR": dir,
		}})
	}
	folding := start(captureConfig)
	pdf := start(captureConfig + `
[envoy]
format_suffixes = ["json", "pdf"]
`)
	strict := start(captureConfig + `
[envoy]
routes_case_sensitive = true
`)

	const (
		frozen, locked, archived = "order-frozen", "item-locked", "archive-closed"
		allowed                  = ""
		pathInvalid              = "path-invalid"
	)
	type check struct {
		method, path string
		want         string // a deny reason, pathInvalid, or allowed
	}
	groups := []struct {
		name   string
		s      *harness.Sidecar
		checks []check
	}{
		{"default", folding, []check{
			// Deny keyed on an id, default mapping.
			{"DELETE", "/orders/42", frozen},
			{"DELETE", "/orders/42.json", frozen},
			{"DELETE", "/orders/42.JSON", frozen},
			{"DELETE", "/orders/42.Csv", frozen},
			{"GET", "/orders/42.xml", frozen},
			{"DELETE", "/Orders/42", frozen},
			{"DELETE", "/ORDERS/42.Json", frozen},
			{"DELETE", "//orders/x/../%34%32.json", frozen},
			{"DELETE", "/orders/43.json", allowed},
			{"GET", "/Orders/43.JSON", allowed},
			{"PUT", "/orders/42.json", "mapped orders:update id=42 format=json"},
			{"PUT", "/Orders/42.JSON", "mapped orders:update id=42 format=json"},
			// pdf is not a default format: the suffix stays in the id.
			{"PUT", "/orders/42.pdf", "mapped orders:update id=42.pdf format="},
			// Deny keyed on a resource name, default mapping.
			{"DELETE", "/archive/1", archived},
			{"DELETE", "/Archive/1", archived},
			{"DELETE", "/ARCHIVE/1.json", archived},
			{"GET", "/Archive.JSON", archived},
			{"PUT", "/ARCHIVE/1.json", "mapped archive:update id=1 format=json"},
			// Deny keyed on a route capture; the capture keeps its case.
			{"DELETE", "/items/ABC", locked},
			{"DELETE", "/items/ABC.json", locked},
			{"DELETE", "/Items/ABC.JSON", locked},
			{"DELETE", "/items/abc", allowed},
			{"DELETE", "/items/abc.json", allowed},
			{"PUT", "/items/abc", "mapped items:update id=abc format="},
			{"PUT", "/items/ABC.json", "mapped items:update id=ABC format=json"},
		}},
		// envoy.format_suffixes = ["json", "pdf"].
		{"formats json,pdf", pdf, []check{
			{"DELETE", "/orders/42.pdf", frozen},
			{"DELETE", "/orders/42.PDF", frozen},
			{"DELETE", "/orders/42.json", frozen},
			{"DELETE", "/items/ABC.pdf", locked},
			{"DELETE", "/orders/42.csv", allowed},
			{"PUT", "/orders/42.pdf", "mapped orders:update id=42 format=pdf"},
			{"PUT", "/orders/42.csv", "mapped orders:update id=42.csv format="},
		}},
		// envoy.routes_case_sensitive = true: the operator's choice.
		{"case-sensitive", strict, []check{
			{"PUT", "/Archive/1", "mapped Archive:update id=1 format="},
			{"DELETE", "/Archive/1", allowed},
			{"DELETE", "/archive/1", archived},
			{"DELETE", "/archive/1.JSON", archived},
			{"DELETE", "/orders/42.json", frozen},
			{"DELETE", "/items/ABC.json", locked},
			{"DELETE", "/items/abc", allowed},
			{"DELETE", "/Items/ABC", pathInvalid},
		}},
	}
	for _, g := range groups {
		for _, tc := range g.checks {
			name := g.name + " " + tc.method + " " + tc.path
			t.Run("envoy "+name, func(t *testing.T) {
				r := envoyCheck(t, g.s, tc.method, tc.path, clerk, nil)
				checkCaptureOutcome(t, r.status, r.body, tc.want)
			})
			t.Run("check "+name, func(t *testing.T) {
				status, body := forwardAuthCheck(t, g.s, tc.method, tc.path, clerk)
				checkCaptureOutcome(t, status, body, tc.want)
			})
		}
	}
}

// checkCaptureOutcome checks a proxy's answer: 400 path-invalid, 200
// when want is "", else 403 with the reason want.
func checkCaptureOutcome(t *testing.T, status int, body, want string) {
	t.Helper()
	if want == "path-invalid" {
		checkRouteOutcome(t, status, body, want)
		return
	}
	checkPlanOutcome(t, status, body, want)
}

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
