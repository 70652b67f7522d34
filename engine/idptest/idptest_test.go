package idptest_test

import (
	"testing"

	"github.com/svc-dev/svc/engine/idptest"
)

// TestAliasesCompile: code written against the retired package still
// builds and gets the same fake identity provider.
func TestAliasesCompile(t *testing.T) {
	var p *idptest.IdP = idptest.New(t, idptest.WithTLS())
	tok := p.Token(t, idptest.Override(idptest.Claims("user-1", "acme", "viewer"), map[string]any{"sub": "user-2"}))
	if tok == "" || p.JWKSURL() == "" || idptest.KID == "" {
		t.Fatalf("token %q, JWKS %q", tok, p.JWKSURL())
	}
}
