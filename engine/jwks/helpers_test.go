package jwks_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/jose"
	"github.com/svc-dev/svc/internal/testkit/jwkstest"
)

// testKeys are generated once per test binary: RSA generation is slow.
type testKeys struct {
	rsa, rsa2 *rsa.PrivateKey
	weak      *rsa.PrivateKey // 1024 bits
	ec        *ecdsa.PrivateKey
	p384      *ecdsa.PrivateKey
	ed        ed25519.PublicKey
}

var keys = sync.OnceValue(func() testKeys {
	must := func(k *rsa.PrivateKey, err error) *rsa.PrivateKey {
		if err != nil {
			panic(err)
		}
		return k
	}
	mustEC := func(k *ecdsa.PrivateKey, err error) *ecdsa.PrivateKey {
		if err != nil {
			panic(err)
		}
		return k
	}
	ed, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return testKeys{
		rsa:  must(rsa.GenerateKey(rand.Reader, 2048)),
		rsa2: must(rsa.GenerateKey(rand.Reader, 2048)),
		weak: must(rsa.GenerateKey(rand.Reader, 1024)),
		ec:   mustEC(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)),
		p384: mustEC(ecdsa.GenerateKey(elliptic.P384(), rand.Reader)),
		ed:   ed,
	}
})

var b64 = jose.B64

// rsaJWK is the JWK of pub plus extra: jwx refuses to import a 1024-bit
// key, which jose builds by hand.
func rsaJWK(kid string, pub *rsa.PublicKey, extra ...string) map[string]any {
	return withExtra(jose.RSAJWK(kid, pub), extra)
}

func ecJWK(kid string, pub *ecdsa.PublicKey, extra ...string) map[string]any {
	return withExtra(jose.ECJWK(kid, pub), extra)
}

// withExtra adds name/value pairs such as "alg", "RS256".
func withExtra(m map[string]any, extra []string) map[string]any {
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

func jwksJSON(_ testing.TB, keys ...map[string]any) []byte { return jose.JWKS(keys...) }

// idp is a JWKS endpoint over real TLS that counts its requests and can
// rotate its keys or fail.
type idp = jwkstest.Server

func newIDP(t testing.TB, body []byte) *idp { return jwkstest.New(t, body) }

// clock is the tests' settable clock.
type clock = testkit.Clock

func newClock() *clock { return testkit.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)) }

func newCache(t testing.TB, p *idp, mod func(*jwks.Options)) *jwks.Cache {
	t.Helper()
	opts := jwks.Options{URL: p.Srv.URL + "/jwks.json", Client: p.Srv.Client()}
	if mod != nil {
		mod(&opts)
	}
	c, err := jwks.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clockedCache is a cache of p's keys on a test clock that the test
// advances.
func clockedCache(t testing.TB, p *idp) (*jwks.Cache, *clock) {
	t.Helper()
	clk := newClock()
	return newCache(t, p, func(o *jwks.Options) { o.Now = clk.Now }), clk
}
