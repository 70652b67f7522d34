package engine

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit/idptest"
)

// TestAuthorizeUserFromCachedToken: the user of the policy input, built
// once per verified token (deriveUser) and shared by every request with
// it, is the one userFrom builds from the token decision, for varied
// claims, on the verification and on cache hits alike.
func TestAuthorizeUserFromCachedToken(t *testing.T) {
	base := idptest.Claims("user-1", "acme", "viewer")
	authorizeCached(t, map[string]map[string]any{
		"roles":                 base,
		"no roles":              idptest.Override(base, map[string]any{"roles": nil}),
		"role only":             idptest.Override(base, map[string]any{"roles": nil, "role": "editor"}),
		"role and roles":        idptest.Override(base, map[string]any{"role": "admin", "roles": []any{"viewer", "billing"}}),
		"odd roles":             idptest.Override(base, map[string]any{"roles": []any{"", 7, "viewer", nil, "x,y"}}),
		"roles not a list":      idptest.Override(base, map[string]any{"roles": "viewer"}),
		"email and custom":      idptest.Override(base, map[string]any{"email": "u@acme.example", "department": "sales", "level": 3, "groups": []any{"a", map[string]any{"b": true}}}),
		"registered claims":     idptest.Override(base, map[string]any{"iss": "https://idp", "aud": "svc", "jti": "j-1", "nbf": 1}),
		"email not a string":    idptest.Override(base, map[string]any{"email": 5}),
		"other tenant":          idptest.Override(base, map[string]any{"tenant_id": "globex"}),
		"subject not a string":  idptest.Override(base, map[string]any{"sub": 42}),
		"null custom claim":     idptest.Override(base, map[string]any{"x": nil}),
		"empty role, roles set": idptest.Override(base, map[string]any{"role": "", "roles": []any{"editor"}}),
	}, func(t *testing.T, call string, res Result) {
		if diff := cmp.Diff(userFrom(res.Token), res.Input.User); diff != "" {
			t.Fatalf("%s: input user differs from userFrom's (-want +got):\n%s", call, diff)
		}
		u := res.Input.User
		iss, _ := res.Token.Claims["iss"].(string)
		want := policy.Identity{Kind: KindJWT, ID: u.ID, TenantID: u.TenantID, Roles: u.Roles, Issuer: iss, Claims: u.Claims}
		if res.Input.Identity == nil {
			t.Fatalf("%s: no input.identity", call)
		}
		if diff := cmp.Diff(want, *res.Input.Identity); diff != "" || res.Token.Kind != KindJWT {
			t.Fatalf("%s: input identity (-want +got):\n%s; token kind %q", call, diff, res.Token.Kind)
		}
	})
}

// TestTokenIdentityFromDerivedUser: the subject and tenant of an accepted
// token's decision, read from the user derived when the token was
// verified, are those identity reads from the claims, on the verification
// and on cache hits alike.
func TestTokenIdentityFromDerivedUser(t *testing.T) {
	base := idptest.Claims("user-1", "acme", "viewer")
	authorizeCached(t, map[string]map[string]any{
		"plain":                base,
		"other tenant":         idptest.Override(base, map[string]any{"tenant_id": "globex"}),
		"subject not a string": idptest.Override(base, map[string]any{"sub": 42}),
		"empty subject":        idptest.Override(base, map[string]any{"sub": ""}),
		"unicode":              idptest.Override(base, map[string]any{"sub": "ü-1", "tenant_id": "ácme"}),
	}, func(t *testing.T, call string, res Result) {
		sub, tenant := identity(res.Token.Claims)
		if res.Token.Subject != sub || res.Token.TenantID != tenant {
			t.Fatalf("%s: subject, tenant = %q, %q; claims say %q, %q", call, res.Token.Subject, res.Token.TenantID, sub, tenant)
		}
	})
}

// authorizeCached authorizes a token of each case's claims three times,
// the verification and two cache hits, on an engine of tenant acme, and
// hands check each accepted result.
func authorizeCached(t *testing.T, cases map[string]map[string]any, check func(t *testing.T, call string, res Result)) {
	p := idptest.New(t)
	e := newTestEngine(t, jwksConfig(p), Deps{})
	ctx := context.Background()
	for name, claims := range cases {
		t.Run(name, func(t *testing.T) {
			tok := p.Token(t, claims)
			for _, call := range []string{"verification", "cache hit", "another cache hit"} {
				res, err := e.Authorize(ctx, tok, Input{Action: "orders:read"})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Token.Allowed {
					t.Fatalf("%s: token refused: %s", call, res.Token.Reason)
				}
				check(t, call, res)
			}
		})
	}
}

// jwksConfig is the configuration of an engine of tenant acme that
// verifies p's tokens, failing closed.
func jwksConfig(p *idptest.IdP) config.Config {
	var cfg config.Config
	cfg.SDK.TenantID = "acme"
	cfg.SDK.JWKSURL = p.JWKSURL()
	cfg.SDK.FailMode = config.FailClosed
	return cfg
}

// newTestEngine opens an engine closed when the test ends.
func newTestEngine(t *testing.T, cfg config.Config, deps Deps) *Engine {
	t.Helper()
	e, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
