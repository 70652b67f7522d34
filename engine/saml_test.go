package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/issuer"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/reason"
)

const samlEntity = "https://app.example.com/auth/saml/metadata"

func withSAML(cfg config.Config, keyFile string) config.Config {
	cfg.SDK.SAML = &config.SAML{
		EntityID: samlEntity, ACSURL: "https://app.example.com/auth/saml/acs",
		IDPMetadataFile: "/unused/by/the/engine.xml", TokenSigningKeyFile: keyFile,
	}
	return cfg
}

// The engine verifies the tokens the SAML gateway issues from its own keys,
// next to the IdP's JWKS, with the same claims and policy input.
func TestSAMLTokensVerifiedLocally(t *testing.T) {
	p := idptest.New(t)
	cfg := withSAML(prodConfig(p.JWKSURL()), testkit.TokenKeyFile(t))
	// The IdP's issuer and audience checks must not apply to SAML tokens.
	cfg.JWT.Issuer = "https://idp.example.com/"
	cfg.JWT.Audiences = []string{"orders"}
	sink := &auditSink{}
	e := newEngine(t, cfg, engine.Deps{Audit: sink})
	ctx := context.Background()

	tok, _, err := e.Issuer().Issue(map[string]any{
		"sub": "alice@example.com", "email": "alice@example.com", "tenant_id": "acme",
		"roles": []string{"viewer"}, "department": "finance",
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Authorize(ctx, tok, engine.Input{Action: "orders:read"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Allowed() {
		t.Fatalf("SAML token refused: %s %v", res.Decision.Reason, res.Decision.DenyReasons)
	}
	u := res.Input.User
	if u.ID != "alice@example.com" || u.TenantID != "acme" || u.Email != "alice@example.com" || u.Claims["department"] != "finance" || len(u.Roles) != 1 {
		t.Errorf("policy input user = %+v", u)
	}
	if id := res.Input.Identity; id == nil || id.Kind != engine.KindSession || id.Method != "saml" || id.Issuer != samlEntity ||
		id.ID != u.ID || id.TenantID != "acme" || id.Claims["department"] != "finance" || res.Token.Kind != engine.KindSession {
		t.Errorf("policy input identity = %+v, token kind %q; want a saml session of alice", id, res.Token.Kind)
	}
	// The IdP's own tokens still verify beside them, as JWTs.
	idpClaims := claimsFor("acme", "viewer")
	idpClaims["iss"], idpClaims["aud"] = "https://idp.example.com/", "orders"
	idpRes, err := e.Authorize(ctx, p.Token(t, idpClaims), engine.Input{Action: "orders:read"})
	if err != nil || !idpRes.Token.Allowed {
		t.Fatalf("IdP token refused next to SAML: %v %s", err, idpRes.Token.Reason)
	}
	if id := idpRes.Input.Identity; id == nil || id.Kind != engine.KindJWT || id.Method != "" || id.Issuer != "https://idp.example.com/" {
		t.Errorf("IdP token's identity = %+v, want a jwt of https://idp.example.com/", id)
	}

	// A token from another gateway's key is not trusted.
	other, err := issuer.New(issuer.Options{Issuer: samlEntity, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	foreign, _, err := other.Issue(map[string]any{"sub": "mallory", "tenant_id": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if d := e.ValidateToken(ctx, foreign); d.Allowed || d.Reason != reason.UnknownKID {
		t.Errorf("foreign token: allowed=%v reason=%s, want unknown-kid", d.Allowed, d.Reason)
	}
}

// A SAML-only engine verifies every bearer, whatever sdk.fail_mode says:
// development mode is the absence of any identity source, never
// inferred from fail_mode (open is its default).
func TestSAMLOnlyIsNotDevMode(t *testing.T) {
	var cfg config.Config
	for _, mode := range []string{"", config.FailOpen, config.FailClosed} {
		c := config.Config{SDK: config.SDK{TenantID: "acme", FailMode: mode}}
		e := newEngine(t, withSAML(c, ""), engine.Deps{})
		if e.DevMode() || e.Status().DevMode {
			t.Fatalf("fail_mode %q: an engine with [sdk.saml] and no jwks_url is in development mode", mode)
		}
		if d := e.ValidateToken(context.Background(), "any-bearer-string"); d.Allowed {
			t.Fatalf("fail_mode %q: any bearer string accepted: %s", mode, d.Reason)
		}
	}
	cfg.SDK.TenantID = "acme"
	cfg.SDK.FailMode = config.FailClosed
	cfg = withSAML(cfg, "")
	e := newEngine(t, cfg, engine.Deps{})
	tok, _, err := e.Issuer().Issue(map[string]any{"sub": "bob", "tenant_id": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if d := e.ValidateToken(context.Background(), tok); !d.Allowed || d.Subject != "bob" {
		t.Fatalf("own token: %+v", d)
	}
}
