package engine_test

import (
	"context"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// With [sdk.oidc] the engine issues and verifies session tokens alone
// (no IdP JWKS), and refuses those a back-channel logout ended.
func TestOIDCSessionRevocation(t *testing.T) {
	cfg := config.Config{SDK: config.SDK{
		OIDC:    &config.OIDC{IssuerURL: "https://login.example.com", ClientID: "app", RedirectURL: "https://app.example.com/auth/oidc/callback"},
		Session: config.Session{TokenSigningKeyFile: testkit.TokenKeyFile(t)},
	}}
	e := newEngine(t, cfg, engine.Deps{})
	ctx := context.Background()
	tok, _, err := e.Issuer().Issue(map[string]any{"sub": "ann", "tenant_id": "acme", "roles": []string{"viewer"}, "idp": "default", "idp_sid": "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if d := e.ValidateToken(ctx, tok); !d.Allowed || d.Reason != reason.OK || d.Subject != "ann" {
		t.Fatalf("session token: %+v", d)
	}
	e.SetSessionRevocation(func(_ context.Context, c map[string]any) (bool, error) { return c["idp_sid"] == "s1", nil })
	if d := e.ValidateToken(ctx, tok); d.Allowed || d.Reason != reason.OIDCSessionRevoked {
		t.Fatalf("revoked session: %+v, want %s", d, reason.OIDCSessionRevoked)
	}
	other, _, _ := e.Issuer().Issue(map[string]any{"sub": "bob", "tenant_id": "acme", "idp": "default", "idp_sid": "s2"})
	if d := e.ValidateToken(ctx, other); !d.Allowed {
		t.Fatalf("another session: %+v", d)
	}
}
