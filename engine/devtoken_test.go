package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/devissuer"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/reason"
)

// TestDevIssuerTokens: in development mode, tokens of the development
// issuer are verified for real (a tampered or expired one is refused)
// and reach an allowed decision in the default tenant, dev; any other
// bearer is still anonymous. Outside development mode the issuer is
// never trusted.
func TestDevIssuerTokens(t *testing.T) {
	dev, created, err := devissuer.Open(t.TempDir())
	if err != nil || !created {
		t.Fatalf("Open = %v, created %v", err, created)
	}
	var cfg config.Config
	e := newEngine(t, cfg, engine.Deps{DevIssuer: dev})
	if !e.DevMode() || e.Config().SDK.TenantID != config.DevTenant {
		t.Fatalf("dev mode %v, tenant %q; want development mode in tenant %q", e.DevMode(), e.Config().SDK.TenantID, config.DevTenant)
	}
	ctx := context.Background()
	now := time.Now()
	sign := func(tk devissuer.Token, at time.Time) string {
		t.Helper()
		if tk.TTL == 0 {
			tk.TTL = time.Hour
		}
		s, err := dev.Sign(tk, at)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	viewer := sign(devissuer.Token{Subject: "dev-user", Tenant: "dev", Roles: []string{"viewer"}}, now)

	d := e.ValidateToken(ctx, viewer)
	if !d.Allowed || d.Reason != reason.OK || d.Subject != "dev-user" || d.TenantID != "dev" || d.Claims["iss"] != devissuer.Issuer {
		t.Fatalf("dev token: %+v", d)
	}
	res, err := e.Authorize(ctx, viewer, engine.Input{Action: "orders:read"})
	if err != nil || !res.Decision.Allow || res.Decision.Reason != reason.PolicyAllow {
		t.Fatalf("authorize orders:read with a viewer's dev token = %+v, %v; want policy-allow", res.Decision, err)
	}
	if res, _ := e.Authorize(ctx, viewer, engine.Input{Action: "orders:delete"}); res.Decision.Allow {
		t.Error("a viewer's dev token may delete")
	}

	// Tampered: the payload of an admin's token on the viewer's
	// signature.
	admin := sign(devissuer.Token{Subject: "dev-user", Tenant: "dev", Roles: []string{"admin"}}, now)
	vp, ap := strings.Split(viewer, "."), strings.Split(admin, ".")
	tampered := vp[0] + "." + ap[1] + "." + vp[2]
	expired := sign(devissuer.Token{Subject: "dev-user", Tenant: "dev", Roles: []string{"admin"}, TTL: time.Minute}, now.Add(-2*time.Hour))
	for name, tc := range map[string]struct {
		tok  string
		want reason.Code
	}{
		"tampered": {tampered, reason.SignatureInvalid},
		"expired":  {expired, reason.TokenExpired},
	} {
		if d := e.ValidateToken(ctx, tc.tok); d.Allowed || d.Reason != tc.want {
			t.Errorf("%s dev token: %+v; want refused %s", name, d, tc.want)
		}
		if res, _ := e.Authorize(ctx, tc.tok, engine.Input{Action: "orders:delete"}); res.Decision.Allow {
			t.Errorf("%s dev token allowed", name)
		}
	}
	// A key of another directory signs a token the engine refuses.
	other, _, err := devissuer.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := other.Sign(devissuer.Token{Subject: "x", Tenant: "dev", Roles: []string{"admin"}, TTL: time.Hour}, now)
	if d := e.ValidateToken(ctx, forged); d.Allowed {
		t.Errorf("a token of another dev key: %+v", d)
	}
	if d := e.ValidateToken(ctx, "anything"); !d.Allowed || d.Reason != reason.DevAnonymous {
		t.Errorf("another bearer: %+v; want dev-anonymous", d)
	}

	// Outside development mode the dev issuer is never trusted, even
	// when handed over.
	p := idptest.New(t)
	prod := newEngine(t, prodConfig(p.JWKSURL()), engine.Deps{DevIssuer: dev})
	if d := prod.ValidateToken(ctx, viewer); d.Allowed {
		t.Errorf("production engine took a dev token: %+v", d)
	}
}
