package engine_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/reason"
)

// exportGate denies the export route by its canonical path, as a policy
// that gates routes should.
const exportGate = `package svc.authz

default allow := false

allow if input.request.canonical_path != "/api/reports/export"

deny_reasons contains "export-gated" if not allow
`

// TestAuthorizeCanonicalPath: whatever spelling an Authorize caller sends
// for a path, the policy sees the one the route table reads, lower-cased
// unless routes are case-sensitive and without a known format suffix; a
// path without a single meaning is denied with path-invalid, and what a
// caller puts in the canonical fields is replaced.
func TestAuthorizeCanonicalPath(t *testing.T) {
	p := idptest.New(t)
	dir := t.TempDir()
	testkit.WriteFile(t, filepath.Join(dir, "authz.rego"), []byte(exportGate))
	tok := p.Token(t, claimsFor("acme", "viewer"))
	for _, caseSensitive := range []bool{false, true} {
		cfg := prodConfig(p.JWKSURL())
		cfg.Policy.Dir = dir
		cfg.Envoy.RoutesCaseSensitive = caseSensitive
		e := newEngine(t, cfg, engine.Deps{})
		for _, tc := range []struct {
			path, canonical, format string
			code                    reason.Code
		}{
			{"/api/reports/export", "/api/reports/export", "", reason.PolicyDeny},
			{"/api/reports/export.json", "/api/reports/export", "json", reason.PolicyDeny},
			{"/api/reports/%65xport.CSV", "/api/reports/export", "csv", reason.PolicyDeny},
			{"//api/x/../reports/./export", "/api/reports/export", "", reason.PolicyDeny},
			{"/API/reports/Export", "/api/reports/export", "", reason.PolicyDeny},
			{"/api/reports/export.pdf", "/api/reports/export.pdf", "", reason.PolicyAllow},
			{"/api/reports/export;.json", "", "", reason.PathInvalid},
			{"", "", "", reason.PolicyAllow},
		} {
			if caseSensitive && tc.path == "/API/reports/Export" {
				tc.canonical, tc.code = "/API/reports/Export", reason.PolicyAllow
			}
			req := &policy.Request{Method: "GET", Path: tc.path, CanonicalPath: "/forged", Format: "forged"}
			res, err := e.Authorize(context.Background(), tok, engine.Input{Action: "reports:read", Request: req})
			if err != nil {
				t.Fatal(err)
			}
			if res.Decision.Reason != tc.code {
				t.Errorf("case-sensitive %v, %q: reason %s, want %s", caseSensitive, tc.path, res.Decision.Reason, tc.code)
			}
			if tc.code == reason.PathInvalid {
				continue
			}
			if r := res.Input.Request; r.CanonicalPath != tc.canonical || r.Format != tc.format {
				t.Errorf("case-sensitive %v, %q: canonical %q format %q, want %q %q", caseSensitive, tc.path, r.CanonicalPath, r.Format, tc.canonical, tc.format)
			}
		}
	}
}

// TestAuthorizeFormatSuffixesFromConfig: envoy.format_suffixes decides
// which suffixes are cut; an empty list cuts none.
func TestAuthorizeFormatSuffixesFromConfig(t *testing.T) {
	p := idptest.New(t)
	tok := p.Token(t, claimsFor("acme", "viewer"))
	for _, tc := range []struct {
		formats   []string
		canonical string
	}{
		{nil, "/reports/export"},
		{[]string{}, "/reports/export.json"},
		{[]string{"pdf"}, "/reports/export.json"},
	} {
		cfg := prodConfig(p.JWKSURL())
		cfg.Envoy.FormatSuffixes = tc.formats
		e := newEngine(t, cfg, engine.Deps{})
		res, err := e.Authorize(context.Background(), tok, engine.Input{Action: "reports:read", Request: &policy.Request{Method: "GET", Path: "/reports/export.json"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Input.Request.CanonicalPath; got != tc.canonical {
			t.Errorf("format_suffixes %q: canonical %q, want %q", tc.formats, got, tc.canonical)
		}
	}
}
