package engine_test

import (
	"context"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/reason"
)

// TestDecideCanonical: the engine takes the canonical path and format of
// a request as they are only when the request says its mapper computed
// them (Request.Canonical); otherwise it computes them from the path, as
// for every caller of Authorize.
func TestDecideCanonical(t *testing.T) {
	p := idptest.New(t)
	e := newEngine(t, prodConfig(p.JWKSURL()), engine.Deps{})
	tok := p.Token(t, claimsFor("acme", "viewer"))
	tests := []struct {
		name              string
		canonical         bool
		wantPath, wantFmt string
	}{
		{"computed by the engine", false, "/api/reports/export", "json"},
		// A mapper whose routes are case-sensitive keeps the case: the
		// engine does not compute the fields again.
		{"taken from the mapper", true, "/API/Reports/Export", "json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &policy.Request{Method: "GET", Path: "/API/Reports/Export.json", CanonicalPath: "/API/Reports/Export", Format: "json"}
			res, err := e.Decide(context.Background(), engine.Request{
				Credential: engine.BearerToken(tok),
				Input:      engine.Input{Action: "orders:read", Request: req},
				Canonical:  tt.canonical,
			})
			if err != nil || res.Decision.Reason != reason.PolicyAllow {
				t.Fatalf("decision %s, %v", res.Decision.Reason, err)
			}
			if r := res.Input.Request; r.CanonicalPath != tt.wantPath || r.Format != tt.wantFmt {
				t.Errorf("canonical %q format %q, want %q %q", r.CanonicalPath, r.Format, tt.wantPath, tt.wantFmt)
			}
		})
	}
}

// TestDecideScopes: each scope answers as its shorthand does.
func TestDecideScopes(t *testing.T) {
	p := idptest.New(t)
	e := newEngine(t, prodConfig(p.JWKSURL()), engine.Deps{})
	ctx := context.Background()
	tok := p.Token(t, claimsFor("acme", "viewer"))
	in := engine.Input{Action: "orders:read"}

	tokRes, err := e.Decide(ctx, engine.Request{Scope: engine.ScopeToken, Credential: engine.BearerToken(tok)})
	if want := e.ValidateToken(ctx, tok); err != nil || tokRes.Token.Reason != want.Reason || tokRes.Token.Subject != want.Subject || tokRes.Decision.DecisionID != "" {
		t.Errorf("ScopeToken: %+v %v, want the token decision %+v alone", tokRes, err, want)
	}
	authRes, err := e.Decide(ctx, engine.Request{Credential: engine.BearerToken(tok), Input: in})
	if want, _ := e.Authorize(ctx, tok, in); err != nil || authRes.Allowed() != want.Allowed() || authRes.Decision.Reason != want.Decision.Reason {
		t.Errorf("ScopeAuthorize: %+v %v, want %+v", authRes.Decision, err, want.Decision)
	}
	polRes, err := e.Decide(ctx, engine.Request{Scope: engine.ScopePolicy, Input: authRes.Input})
	if want, _ := e.Evaluate(ctx, authRes.Input); err != nil || polRes.Decision.Allow != want.Allow || polRes.Token.Allowed {
		t.Errorf("ScopePolicy: %+v %v, want %+v", polRes, err, want)
	}
	if _, err := e.Decide(ctx, engine.Request{Scope: engine.ScopePlan + 1}); err == nil {
		t.Error("an unknown scope was answered")
	}
}
