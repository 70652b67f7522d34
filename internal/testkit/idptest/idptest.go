// Package idptest provides a fake identity provider for tests: a JWKS
// endpoint served on loopback and RS256 tokens signed with its key, made
// with the standard library only, so that tokens are minted independently
// of the JWT library the engine verifies them with.
//
// Like net/http/httptest it is meant to be imported by tests only.
package idptest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit/jose"
)

// KID is the key id of the IdP's key, published in its JWKS and written
// in the header of every token it signs.
const KID = "idptest-rsa-1"

// jwksPath and discoveryPath are the only paths the IdP answers; any
// other is 404.
const (
	jwksPath      = "/jwks.json"
	discoveryPath = "/.well-known/openid-configuration"
)

// signingKey is generated once per process and shared by every IdP:
// 2048-bit RSA generation takes long, under -race even more.
var signingKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(fmt.Sprintf("idptest: generate rsa key: %v", err))
	}
	return k
})

// IdP is an identity provider on loopback. Every IdP of a process signs
// with the same key under the same kid, so a token of one verifies
// against the JWKS of any other.
type IdP struct {
	key *rsa.PrivateKey
	srv *httptest.Server
}

// Option changes how New starts an IdP.
type Option func(*options)

type options struct {
	tls bool
}

// WithTLS serves the JWKS over https with a self-signed certificate; use
// Client to reach it.
func WithTLS() Option {
	return func(o *options) { o.tls = true }
}

// New starts an IdP serving its JWKS over plain http on 127.0.0.1, which
// the engine accepts for a loopback host, until the test ends.
func New(t testing.TB, opts ...Option) *IdP {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	p := &IdP{key: signingKey()}
	pub := p.key.PublicKey
	jwk := jose.RSAJWK(KID, &pub)
	jwk["use"], jwk["alg"] = "sig", "RS256"
	body := jose.JWKS(jwk)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case jwksPath:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "max-age=300")
			_, _ = w.Write(body)
		case discoveryPath:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": p.Issuer(), "jwks_uri": p.JWKSURL()})
		default:
			http.NotFound(w, r)
		}
	})
	if o.tls {
		p.srv = httptest.NewTLSServer(h)
	} else {
		p.srv = httptest.NewServer(h)
	}
	t.Cleanup(p.srv.Close)
	return p
}

// JWKSURL returns the address of the JWKS endpoint.
func (p *IdP) JWKSURL() string { return p.srv.URL + jwksPath }

// Issuer returns the IdP's OpenID Connect issuer: its base URL, whose
// discovery document (/.well-known/openid-configuration) names it and
// JWKSURL.
func (p *IdP) Issuer() string { return p.srv.URL }

// Client returns an HTTP client that trusts the IdP's certificate when it
// serves over TLS.
func (p *IdP) Client() *http.Client { return p.srv.Client() }

// Close stops serving the JWKS, as an outage of the identity provider
// would. Calling it more than once is harmless.
func (p *IdP) Close() { p.srv.Close() }

// Token returns an RS256 token of exactly claims, failing t when signing
// fails.
func (p *IdP) Token(t testing.TB, claims map[string]any) string {
	t.Helper()
	tok, err := p.Sign(claims)
	if err != nil {
		t.Fatalf("idptest: %v", err)
	}
	return tok
}

// Sign returns an RS256 token of exactly claims. Unlike Token it needs no
// testing.TB, so goroutines other than the test's may call it.
func (p *IdP) Sign(claims map[string]any) (string, error) {
	hdr, err := json.Marshal(map[string]any{"alg": "RS256", "typ": "JWT", "kid": KID})
	if err != nil {
		return "", fmt.Errorf("encode header: %w", err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encode claims: %w", err)
	}
	return jose.Sign("RS256", jose.B64(hdr)+"."+jose.B64(payload), p.key)
}

// Claims returns a valid claim set for sub in tenant: sub, tenant_id,
// roles (never null), iat now and exp five minutes ahead.
func Claims(sub, tenant string, roles ...string) map[string]any {
	now := time.Now()
	if roles == nil {
		roles = []string{}
	}
	return map[string]any{
		"sub": sub, "tenant_id": tenant, "roles": roles,
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
	}
}

// Override returns a copy of base in which the entries of over replace
// base's; an entry of over whose value is nil removes that key instead.
func Override(base, over map[string]any) map[string]any {
	c := maps.Clone(base)
	if c == nil {
		c = make(map[string]any, len(over))
	}
	for k, v := range over {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}
