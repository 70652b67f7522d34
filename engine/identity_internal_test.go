package engine

import (
	"context"
	"testing"

	"github.com/svc-dev/svc/internal/idptest"
)

// TestTokenIdentityFromDerivedUser: the subject and tenant of an accepted
// token's decision, read from the user derived when the token was
// verified, are those identity reads from the claims, on the verification
// and on cache hits alike.
func TestTokenIdentityFromDerivedUser(t *testing.T) {
	p := idptest.New(t)
	e := newTestEngine(t, jwksConfig(p), Deps{})
	base := idptest.Claims("user-1", "acme", "viewer")
	cases := map[string]map[string]any{
		"plain":                base,
		"other tenant":         idptest.Override(base, map[string]any{"tenant_id": "globex"}),
		"subject not a string": idptest.Override(base, map[string]any{"sub": 42}),
		"empty subject":        idptest.Override(base, map[string]any{"sub": ""}),
		"unicode":              idptest.Override(base, map[string]any{"sub": "ü-1", "tenant_id": "ácme"}),
	}
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
				sub, tenant := identity(res.Token.Claims)
				if res.Token.Subject != sub || res.Token.TenantID != tenant {
					t.Fatalf("%s: subject, tenant = %q, %q; claims say %q, %q", call, res.Token.Subject, res.Token.TenantID, sub, tenant)
				}
			}
		})
	}
}
