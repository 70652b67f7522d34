package engine_test

import (
	"context"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/reason"
)

// jwt.issuer_url finds the keys through the provider's discovery
// document, and tokens must carry the issuer URL as iss.
func TestIssuerURL(t *testing.T) {
	p := idptest.New(t)
	cfg := prodConfig("")
	cfg.JWT.IssuerURL = p.Issuer()
	e := newEngine(t, cfg, engine.Deps{})
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		iss  any
		want reason.Code
	}{
		{"the issuer's token", p.Issuer(), reason.OK},
		{"another iss", "https://other.example.com", reason.IssuerMismatch},
		{"no iss", nil, reason.IssuerMismatch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tok := p.Token(t, idptest.Override(idptest.Claims("user-1", "acme"), map[string]any{"iss": tt.iss}))
			if d := e.ValidateToken(ctx, tok); d.Reason != tt.want {
				t.Fatalf("ValidateToken = %s (%s), want %s", d.Reason, d.Message, tt.want)
			}
		})
	}
	st := e.Status()
	if len(st.Issuers) != 1 || st.Issuers[0].Issuer != p.Issuer() || st.JWKS.URL != p.JWKSURL() || st.JWKS.Issuer != p.Issuer() {
		t.Errorf("status issuers %+v, jwks %+v; want the issuer and its discovered jwks_uri", st.Issuers, st.JWKS)
	}
}

// [[jwt.issuers]]: each token is verified by the provider its iss names,
// with that provider's tenant setting; an unknown iss is refused.
func TestSeveralIssuers(t *testing.T) {
	a, b := idptest.New(t), idptest.New(t)
	const partner = "https://partner.example.net/"
	cfg := prodConfig("")
	cfg.SDK.TenantID = ""
	cfg.JWT.Issuers = []config.JWTIssuer{
		{IssuerURL: a.Issuer(), TenantClaim: "org"},
		{Issuer: partner, JWKSURL: b.JWKSURL(), Tenant: "partner"},
	}
	e := newEngine(t, cfg, engine.Deps{})
	ctx := context.Background()
	claims := func(iss any, set map[string]any) map[string]any {
		c := idptest.Override(idptest.Claims("user-1", "acme"), map[string]any{"iss": iss, "tenant_id": nil})
		return idptest.Override(c, set)
	}
	for _, tt := range []struct {
		name   string
		tok    string
		want   reason.Code
		tenant string
	}{
		{"A's token: tenant from its claim", a.Token(t, claims(a.Issuer(), map[string]any{"org": "initech"})), reason.OK, "initech"},
		{"A's token without its claim", a.Token(t, claims(a.Issuer(), map[string]any{"tenant_id": "acme"})), reason.TenantMissing, ""},
		{"B's token: the fixed tenant", b.Token(t, claims(partner, map[string]any{"tenant_id": "acme"})), reason.OK, "partner"},
		{"unknown iss", a.Token(t, claims("https://c.example.com", map[string]any{"org": "x"})), reason.IssuerUnknown, ""},
		{"no iss", a.Token(t, claims(nil, map[string]any{"org": "x"})), reason.IssuerUnknown, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 { // verified, then from the cache
				d := e.ValidateToken(ctx, tt.tok)
				if d.Reason != tt.want || d.TenantID != tt.tenant {
					t.Fatalf("ValidateToken = %s (%s) tenant %q, want %s %q", d.Reason, d.Message, d.TenantID, tt.want, tt.tenant)
				}
			}
		})
	}
	res, err := e.Authorize(ctx, b.Token(t, claims(partner, map[string]any{"roles": []string{"admin"}})), engine.Input{Action: "read"})
	if err != nil || res.Input.User.TenantID != "partner" {
		t.Errorf("Authorize: user tenant %q, %v; want the issuer's fixed tenant", res.Input.User.TenantID, err)
	}

	st := e.Status()
	if len(st.Issuers) != 2 || st.Issuers[0].Issuer != a.Issuer() || st.Issuers[1].Issuer != partner {
		t.Fatalf("status issuers = %+v, want both in order", st.Issuers)
	}
	testkit.Eventually(t, "both issuers' keys cached", func() bool {
		st := e.Status()
		return st.Issuers[0].JWKS.Keys == 1 && st.Issuers[1].JWKS.Keys == 1 && st.JWKS.Keys == 2
	})
}
