package envoy

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/svc-dev/svc/engine/config"
)

// envoyRoute picks the route Envoy's router would pick for method and
// path in the shipped file's first virtual host, reading the match kinds
// the shipped files use (and failing on any other, so that the test never
// guesses), and returns the context extensions it gives the check.
func envoyRoute(t *testing.T, path, method, target string) map[string]string {
	t.Helper()
	b := loadBootstrap(t, path)
	hcm := unpack(t, b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig(), &hcmv3.HttpConnectionManager{})
	p, _, _ := strings.Cut(target, "?")
	for _, r := range hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes() {
		m := r.GetMatch()
		// case_sensitive (default true) applies to path and prefix, and
		// Envoy folds ASCII letters only.
		fold := m.GetCaseSensitive() != nil && !m.GetCaseSensitive().GetValue()
		var ok bool
		switch {
		case m.GetPath() != "":
			ok = p == m.GetPath() || fold && asciiEqualFold(p, m.GetPath())
		case m.GetPrefix() != "":
			n := len(m.GetPrefix())
			ok = len(p) >= n && (p[:n] == m.GetPrefix() || fold && asciiEqualFold(p[:n], m.GetPrefix()))
		case m.GetSafeRegex() != nil:
			// Envoy's safe_regex is RE2, as Go's regexp, and must match
			// the whole path; case_sensitive does not apply to it.
			ok = regexp.MustCompile(`^(?:` + m.GetSafeRegex().GetRegex() + `)$`).MatchString(p)
		default:
			t.Fatalf("%s: route match %v is not read by this test", path, m)
		}
		for _, h := range m.GetHeaders() {
			sm := h.GetStringMatch()
			if h.GetName() != ":method" || sm.GetExact() == "" || h.GetInvertMatch() {
				t.Fatalf("%s: header match %v is not read by this test", path, h)
			}
			ok = ok && (sm.GetExact() == method || sm.GetIgnoreCase() && asciiEqualFold(sm.GetExact(), method))
		}
		if !ok {
			continue
		}
		a, has := r.GetTypedPerFilterConfig()["envoy.filters.http.ext_authz"]
		if !has {
			return nil
		}
		return unpack(t, a, &extauthzv3.ExtAuthzPerRoute{}).GetCheckSettings().GetContextExtensions()
	}
	t.Fatalf("%s: no route for %s %s", path, method, target)
	return nil
}

// TestShippedEnvoyRoutesTakeTrailingSlash checks that the plan-gated
// action of the shipped config cannot be skipped by a trailing slash, which
// the app serves as the same resource.
func TestShippedEnvoyRoutesTakeTrailingSlash(t *testing.T) {
	const path = "deploy/envoy/envoy.yaml"
	tests := []struct {
		method, target, action string
	}{
		{"POST", "/api/reports/1/export", "reports:export"},
		{"POST", "/api/reports/1/export/", "reports:export"},
		{"POST", "/api/reports/1/export/?format=csv", "reports:export"},
		{"GET", "/api/reports/1/export/", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			if got := envoyRoute(t, path, tt.method, tt.target)[ExtAction]; got != tt.action {
				t.Fatalf("%s = %q, want %q", ExtAction, got, tt.action)
			}
		})
	}
}

// TestRouteTemplatesTakeTrailingSlash checks the sidecar's own route
// table: a template matches with and without a trailing slash.
func TestRouteTemplatesTakeTrailingSlash(t *testing.T) {
	m, err := NewMapper(testTenant, []config.Route{
		{Path: "/api/reports/{id}/export", Methods: []string{"POST"}, Action: "reports:export"},
		{Path: "/admin/reports/", Action: "report:export"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"/api/reports/1/export", "/api/reports/1/export/", "/api/reports/1/export//", "/admin/reports", "/admin/reports/"} {
		t.Run(target, func(t *testing.T) {
			_, in, err := m.FromCheckRequest(checkReq("POST", target, nil, nil))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(in.Action, ":export") {
				t.Fatalf("action = %q, want the route's", in.Action)
			}
		})
	}
}

// asciiEqualFold is Envoy's case-insensitive comparison: ASCII letters
// only.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// TestShippedRoutesTakeCaseAndSuffix checks that the plan-gated export
// cannot be reached under another name the app serves as the same route:
// a letter case a case-insensitive router (Express, ASP.NET Core) folds,
// a format suffix (Rails). Both the shipped Envoy route table (whose
// context extensions must reach the sidecar) and the example's
// sidecar.routes (for nginx, Caddy and Envoy misses) must name the action.
func TestShippedRoutesTakeCaseAndSuffix(t *testing.T) {
	cfg, err := config.Load(filepath.Join(repoRoot, "svc.example.toml"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMapper(cfg.SDK.TenantID, cfg.Sidecar.Routes)
	if err != nil {
		t.Fatal(err)
	}
	m.WithCaseSensitiveRoutes(cfg.Envoy.RoutesCaseSensitive)
	tests := []struct {
		method, target, action string
	}{
		{"POST", "/api/reports/1/export", "reports:export"},
		{"POST", "/api/reports/1/Export", "reports:export"},
		{"POST", "/api/reports/1/EXPORT", "reports:export"},
		{"POST", "/API/Reports/1/eXpOrT", "reports:export"},
		{"POST", "/api/reports/1/export.json", "reports:export"},
		{"POST", "/api/reports/1/Export.JSON", "reports:export"},
		{"POST", "/api/reports/1/export.csv/", "reports:export"},
		{"POST", "/api/reports/1/EXPORT.json?x=1", "reports:export"},
		{"post", "/api/reports/1/Export", "reports:export"},
		{"GET", "/api/reports/1/Export", ""},
		{"POST", "/api/reports/1/exports", ""},
		{"POST", "/api/reports/1/export.tar.gz", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			if got := envoyRoute(t, "deploy/envoy/envoy.yaml", tt.method, tt.target)[ExtAction]; got != tt.action {
				t.Errorf("envoy.yaml: %s = %q, want %q", ExtAction, got, tt.action)
			}
			_, in, err := m.FromCheckRequest(checkReq(tt.method, tt.target, nil, nil))
			if err != nil {
				t.Fatal(err)
			}
			if gated := in.Action == "reports:export"; gated != (tt.action != "") {
				t.Errorf("svc.example.toml routes: action %q", in.Action)
			}
		})
	}
}
