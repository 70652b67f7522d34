// Package idptest is a fake identity provider for tests: a JWKS endpoint
// on loopback and RS256 tokens signed with its key. Its names are
// aliases of the module's own test kit.
//
// Deprecated: the fake identity provider is no longer public API. This
// package will be removed in the next release; a program outside this
// module that mints test tokens should sign them itself.
package idptest

import (
	"testing"

	"github.com/svc-dev/svc/internal/testkit/idptest"
)

// KID is the key id of the IdP's key.
const KID = idptest.KID

// IdP is an identity provider on loopback.
type IdP = idptest.IdP

// Option changes how New starts an IdP.
type Option = idptest.Option

// WithTLS serves the JWKS over https with a self-signed certificate.
func WithTLS() Option { return idptest.WithTLS() }

// New starts an IdP serving its JWKS over plain http on 127.0.0.1 until
// the test ends.
func New(t testing.TB, opts ...Option) *IdP { return idptest.New(t, opts...) }

// Claims returns the claims of a valid token of sub in tenant with roles.
func Claims(sub, tenant string, roles ...string) map[string]any {
	return idptest.Claims(sub, tenant, roles...)
}

// Override returns a copy of base with the entries of over.
func Override(base, over map[string]any) map[string]any { return idptest.Override(base, over) }
