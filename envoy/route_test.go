package envoy

import (
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/reason"
)

// exportRoutes is the route table of the plan-gate attack: the default
// policy gates "reports:export" on the enterprise plan, while a request
// that misses the route falls to the default mapping, "api:create".
var exportRoutes = []config.Route{
	{Path: "/api/reports/{id}/export", Methods: []string{"POST"}, Action: "reports:export"},
	{Path: "/Files/{id}.JSON", Resource: "files"},
	{Path: "/admin/*", Resource: "admin", Action: "admin:access"},
}

// TestRouteCaseAndSuffix checks that a route takes the paths a
// case-insensitive router (Express, ASP.NET Core) or a format-aware one
// (Rails) serves as that route, that captures keep the request's case,
// and that envoy.routes_case_sensitive refuses a near miss instead of
// mapping it by the default rule.
func TestRouteCaseAndSuffix(t *testing.T) {
	tests := []struct {
		name          string
		caseSensitive bool
		method, path  string
		want          string // "action resource id", or a reason code
	}{
		{"exact", false, "POST", "/api/reports/R7/export", "reports:export reports R7"},
		{"capitalized", false, "POST", "/api/reports/R7/Export", "reports:export reports R7"},
		{"upper case", false, "POST", "/api/reports/R7/EXPORT", "reports:export reports R7"},
		{"upper case prefix", false, "POST", "/API/Reports/R7/export", "reports:export reports R7"},
		{"format suffix", false, "POST", "/api/reports/R7/export.json", "reports:export reports R7"},
		{"format suffix, upper case", false, "POST", "/api/reports/R7/EXPORT.CSV", "reports:export reports R7"},
		{"format suffix and trailing slash", false, "POST", "/api/reports/R7/export.json/", "reports:export reports R7"},
		{"percent-encoded letters", false, "POST", "/api/reports/R7/%45xport", "reports:export reports R7"},
		{"other method keeps the default", false, "GET", "/api/reports/R7/Export", "api:read api "},
		{"a suffix is letters and digits only", false, "POST", "/api/reports/R7/export.j-s", "api:create api "},
		{"one suffix only", false, "POST", "/api/reports/R7/export.json.gz", "api:create api "},
		{"no base, no suffix", false, "POST", "/api/reports/R7/.json", "api:create api "},
		{"another word is another route", false, "POST", "/api/reports/R7/exports", "api:create api "},
		{"mixed segment folds its literal part", false, "GET", "/files/AbC.json", "files:read files AbC"},
		{"mixed segment as written", false, "GET", "/Files/AbC.JSON", "files:read files AbC"},
		{"rest route folds", false, "DELETE", "/ADMIN/Users/1", "admin:access admin "},
		{"rest route takes a suffix", false, "GET", "/admin.json", "admin:access admin "},

		{"case-sensitive: exact", true, "POST", "/api/reports/R7/export", "reports:export reports R7"},
		{"case-sensitive: suffix still taken", true, "POST", "/api/reports/R7/export.json", "reports:export reports R7"},
		{"case-sensitive: near miss refused", true, "POST", "/api/reports/R7/Export", string(reason.PathInvalid)},
		{"case-sensitive: near miss with suffix refused", true, "POST", "/api/reports/R7/EXPORT.json", string(reason.PathInvalid)},
		{"case-sensitive: near miss of a rest route refused", true, "GET", "/Admin/x", string(reason.PathInvalid)},
		{"case-sensitive: near miss of a mixed segment refused", true, "GET", "/files/a.json", string(reason.PathInvalid)},
		{"case-sensitive: mixed segment as written", true, "GET", "/Files/a.JSON", "files:read files a"},
		{"case-sensitive: other method is no near miss", true, "GET", "/api/reports/R7/Export", "api:read api "},
		{"case-sensitive: unrelated path keeps the default", true, "POST", "/api/orders/1/ship", "api:create api "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMapper(testTenant, exportRoutes)
			if err != nil {
				t.Fatal(err)
			}
			m.WithCaseSensitiveRoutes(tt.caseSensitive)
			_, in, err := m.FromCheckRequest(checkReq(tt.method, tt.path, nil, nil))
			got := ""
			if err != nil {
				got = string(reason.Of(err, "no reason"))
				if strings.Contains(err.Error(), tt.path) {
					t.Errorf("the error quotes the request path: %v", err)
				}
			} else {
				got = in.Action + " " + in.Resource.Type + " " + in.Resource.ID
			}
			if got != tt.want {
				t.Fatalf("%s %s: got %q (%v), want %q", tt.method, tt.path, got, err, tt.want)
			}
		})
	}
}

// TestRouteOrderWithSuffix checks that the route table's order decides
// between a route taking the suffixed segment whole and an earlier one
// taking it without the suffix.
func TestRouteOrderWithSuffix(t *testing.T) {
	m, err := NewMapper(testTenant, []config.Route{
		{Path: "/api/reports/{id}/export", Action: "reports:export"},
		{Path: "/api/{resource}/{id}/{action}", Action: "api:other"},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, in, err := m.FromCheckRequest(checkReq("GET", "/api/reports/1/Export.xlsx", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if in.Action != "reports:export" {
		t.Fatalf("action %q, want the first route's", in.Action)
	}
}

func TestFormatSuffix(t *testing.T) {
	for seg, want := range map[string]string{
		"export.json": "export", "a.tar.gz": "a.tar", "x.JSON": "x", "v1.2": "v1",
		"export": "", ".json": "", "export.": "", "export.j_s": "", "export.é": "",
	} {
		base, ok := formatSuffix(seg)
		if ok != (want != "") || base != want {
			t.Errorf("formatSuffix(%q) = %q, %v; want %q", seg, base, ok, want)
		}
	}
}

// TestServerRoutesCaseSensitiveFromConfig checks that New reads
// envoy.routes_case_sensitive.
func TestServerRoutesCaseSensitiveFromConfig(t *testing.T) {
	for _, on := range []bool{false, true} {
		var cfg config.Config
		cfg.SDK.TenantID = testTenant
		cfg.Sidecar.Routes = exportRoutes
		cfg.Envoy.RoutesCaseSensitive = on
		s, err := New(cfg, authorizerFunc(nil), Deps{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = s.Mapper().FromCheckRequest(checkReq("POST", "/api/reports/1/Export", nil, nil))
		if got := reason.Of(err, "") == reason.PathInvalid; got != on {
			t.Errorf("routes_case_sensitive = %v: near miss refused = %v (%v)", on, got, err)
		}
	}
}

// BenchmarkRouteMatchFolded maps a path that matches its route only with
// case folding and the format suffix cut off, after missing the others.
func BenchmarkRouteMatchFolded(b *testing.B) {
	m, err := NewMapper(testTenant, append(append([]config.Route{}, testRoutes[1:]...), exportRoutes...))
	if err != nil {
		b.Fatal(err)
	}
	req := checkReq("POST", "/API/Reports/R7/Export.json", nil, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, in, err := m.FromCheckRequest(req); err != nil || in.Action != "reports:export" {
			b.Fatalf("%q %v", in.Action, err)
		}
	}
}
