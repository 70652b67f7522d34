package token_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/jose"
	"github.com/svc-dev/svc/internal/testkit/jwkstest"
)

// t0 is the fixed "now" of the tests.
var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// testKeys are generated once per test binary: RSA generation is slow.
type testKeys struct {
	rsa      *rsa.PrivateKey // JWK without alg: RS256 and PS256
	rsaRS    *rsa.PrivateKey // JWK alg RS256
	rsaPS    *rsa.PrivateKey // JWK alg PS256
	rotated  *rsa.PrivateKey // published only after rotation
	weak     *rsa.PrivateKey // 1024 bits
	attacker *rsa.PrivateKey // never published by the IdP
	ec       *ecdsa.PrivateKey
}

var keys = sync.OnceValue(func() testKeys {
	gen := func(bits int) *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			panic(err)
		}
		return k
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return testKeys{rsa: gen(2048), rsaRS: gen(2048), rsaPS: gen(2048), rotated: gen(2048), weak: gen(1024), attacker: gen(2048), ec: ec}
})

var (
	b64      = jose.B64
	ecJWK    = jose.ECJWK
	jwksJSON = jose.JWKS
)

// rsaJWK is the signing JWK of pub, with alg unless it is "".
func rsaJWK(kid string, pub *rsa.PublicKey, alg string) map[string]any {
	m := jose.RSAJWK(kid, pub)
	m["use"] = "sig"
	if alg != "" {
		m["alg"] = alg
	}
	return m
}

// idpKeys is the set the test IdP publishes before rotation.
func idpKeys() []map[string]any {
	k := keys()
	return []map[string]any{
		rsaJWK("rsa", &k.rsa.PublicKey, ""),
		rsaJWK("rs", &k.rsaRS.PublicKey, "RS256"),
		rsaJWK("ps", &k.rsaPS.PublicKey, "PS256"),
		ecJWK("ec", &k.ec.PublicKey),
		rsaJWK("weak", &k.weak.PublicKey, ""),
	}
}

// jwksServer is a JWKS endpoint over real TLS that counts its requests and
// can rotate keys or fail.
type jwksServer = jwkstest.Server

func newJWKSServer(t testing.TB, body []byte) *jwksServer { return jwkstest.New(t, body) }

// clock is the fixture's settable clock.
type clock = testkit.Clock

// countingKeys counts key lookups, to tell cache hits from verifications.
type countingKeys struct {
	token.KeySource
	n atomic.Int64
}

func (c *countingKeys) Key(ctx context.Context, kid string) (jwks.Key, error) {
	c.n.Add(1)
	return c.KeySource.Key(ctx, kid)
}

// fixture is a verifier wired to a real JWKS cache and TLS IdP.
type fixture struct {
	idp   *jwksServer
	cache *jwks.Cache
	keys  *countingKeys
	clock *clock
	v     *token.Verifier
}

func newFixture(t testing.TB, mod func(*token.Options)) *fixture {
	t.Helper()
	f := &fixture{idp: newJWKSServer(t, jwksJSON(idpKeys()...)), clock: testkit.NewClock(t0)}
	// As the engine wires it: a changed key set drops what withdrawn keys
	// verified.
	onChange := func() { f.v.Retain(f.cache.Holds) }
	c, err := jwks.New(jwks.Options{URL: f.idp.Srv.URL + "/jwks.json", Client: f.idp.Srv.Client(), Now: f.clock.Now, OnChange: onChange})
	if err != nil {
		t.Fatal(err)
	}
	f.cache = c
	f.keys = &countingKeys{KeySource: c}
	opts := token.Options{Keys: f.keys, Now: f.clock.Now}
	if mod != nil {
		mod(&opts)
	}
	if f.v, err = token.New(opts); err != nil {
		t.Fatal(err)
	}
	return f
}

// claims returns a realistic claim set valid at t0.
func claims() map[string]any {
	return map[string]any{
		"iss":       "https://idp.example.com",
		"sub":       "user-1",
		"aud":       "svc",
		"tenant_id": "acme",
		"roles":     []any{"admin", "billing:read"},
		"email":     "user-1@acme.example",
		"iat":       t0.Add(-time.Minute).Unix(),
		"nbf":       t0.Add(-time.Minute).Unix(),
		"exp":       t0.Add(time.Hour).Unix(),
		"org":       map[string]any{"id": 42, "plan": "gold", "flags": []any{true, nil, 1.5}},
		"big":       json.Number("123456789012345678901234567890"),
	}
}

// with returns claims() changed by set; a nil value deletes the claim.
func with(set map[string]any) map[string]any {
	c := claims()
	for k, v := range set {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// hdr builds a JOSE header with alg and kid ("" leaves kid out) plus extra
// members.
func hdr(alg, kid string, extra map[string]any) map[string]any {
	h := map[string]any{"alg": alg, "typ": "JWT"}
	if kid != "" {
		h["kid"] = kid
	}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

// sign produces a compact JWS of payload with the given header, using the
// header's alg with key. It signs with crypto primitives so that tests can
// build tokens jwx would refuse to produce.
func sign(header map[string]any, payload []byte, key any) string {
	alg, _ := header["alg"].(string)
	return signSegments(alg, b64(mustJSON(header))+"."+b64(payload), key)
}

// signSegments signs the signing input as given, so that its segments may
// be anything.
func signSegments(alg, input string, key any) string { return jose.MustSign(alg, input, key) }

// signClaims signs claims with the header's alg.
func signClaims(header, claims map[string]any, key any) string {
	return sign(header, mustJSON(claims), key)
}

func b64Decode(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
