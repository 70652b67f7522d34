package token_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"

	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/reason"
)

// fixedKeys is a key source of fixed keys, counting lookups.
type fixedKeys struct {
	keys map[string]jwks.Key
	n    int
}

func (f *fixedKeys) Key(_ context.Context, kid string) (jwks.Key, error) {
	f.n++
	k, ok := f.keys[kid]
	if !ok {
		return jwks.Key{}, reason.New(reason.UnknownKID, "kid not found")
	}
	return k, nil
}

// issuerFixture is an issuer with a key of its own and its verifier.
type issuerFixture struct {
	iss    string
	kid    string
	signer any
	alg    string
	keys   *fixedKeys
	v      *token.Verifier
}

func newIssuer(t testing.TB, iss string, signer any, pub any, alg jwa.SignatureAlgorithm, mod func(*token.Options)) *issuerFixture {
	t.Helper()
	k, err := jwks.LocalKey(pub, alg)
	if err != nil {
		t.Fatal(err)
	}
	f := &issuerFixture{iss: iss, kid: k.ID, signer: signer, alg: alg.String(), keys: &fixedKeys{keys: map[string]jwks.Key{k.ID: k}}}
	opts := token.Options{Keys: f.keys, Issuer: iss, Now: func() time.Time { return t0 }}
	if mod != nil {
		mod(&opts)
	}
	if f.v, err = token.New(opts); err != nil {
		t.Fatal(err)
	}
	return f
}

// token signs claims with set applied, as this issuer (its kid and key).
func (f *issuerFixture) token(set map[string]any) string {
	return signClaims(hdr(f.alg, f.kid, nil), with(set), f.signer)
}

func TestRouter(t *testing.T) {
	k := keys()
	a := newIssuer(t, "https://a.example.com", k.rsa, &k.rsa.PublicKey, jwa.RS256(), nil)
	b := newIssuer(t, "https://b.example.com", k.ec, &k.ec.PublicKey, jwa.ES256(), func(o *token.Options) {
		o.TenantOptional = true
	})
	r, err := token.NewRouter(a.v, b.v)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tests := []struct {
		name string
		tok  string
		want reason.Code // "" for accepted
	}{
		{"A's token", a.token(map[string]any{"iss": a.iss}), ""},
		{"B's token", b.token(map[string]any{"iss": b.iss}), ""},
		{"B's token without tenant: B's tenant is fixed", b.token(map[string]any{"iss": b.iss, "tenant_id": nil}), ""},
		{"A's token without tenant", a.token(map[string]any{"iss": a.iss, "tenant_id": nil}), reason.TenantMissing},
		{"A's key and kid, B's iss", a.token(map[string]any{"iss": b.iss}), reason.UnknownKID},
		{"another EC key under B's kid and iss", signClaims(hdr("ES256", b.kid, nil), with(map[string]any{"iss": b.iss}), other), reason.SignatureInvalid},
		{"A's key with RS256 under B's kid", signClaims(hdr("RS256", b.kid, nil), with(map[string]any{"iss": b.iss}), k.rsa), reason.AlgNotAllowed},
		{"unknown iss", a.token(map[string]any{"iss": "https://c.example.com"}), reason.IssuerUnknown},
		{"no iss", a.token(map[string]any{"iss": nil}), reason.IssuerUnknown},
		{"iss not a string", a.token(map[string]any{"iss": 7}), reason.IssuerUnknown},
		{"iss in another case", a.token(map[string]any{"iss": nil, "ISS": a.iss}), reason.IssuerUnknown},
		{"not a JWS", "abc", reason.TokenMalformed},
		{"payload not base64", "e30.!!!.e30", reason.TokenMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claims, _, err := r.VerifyDerived(ctx, tt.tok)
			if got := reason.Of(err, ""); got != tt.want {
				t.Fatalf("VerifyDerived = %v, want reason %q", err, tt.want)
			}
			if tt.want == "" && claims == nil {
				t.Fatal("no claims for an accepted token")
			}
		})
	}
}

// A cached token belongs to the issuer that verified it: a hit is served
// from that verifier's cache with what it derived, and the other
// issuer's cache holds nothing of it.
func TestRouterCache(t *testing.T) {
	k := keys()
	derive := func(tag string) func(*token.Options) {
		return func(o *token.Options) { o.Derive = func(token.Claims) any { return tag } }
	}
	a := newIssuer(t, "https://a.example.com", k.rsa, &k.rsa.PublicKey, jwa.RS256(), derive("a"))
	b := newIssuer(t, "https://b.example.com", k.ec, &k.ec.PublicKey, jwa.ES256(), derive("b"))
	r, err := token.NewRouter(a.v, b.v)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ta, tb := a.token(map[string]any{"iss": a.iss}), b.token(map[string]any{"iss": b.iss})
	for range 3 {
		for _, c := range []struct {
			tok, want string
		}{{ta, "a"}, {tb, "b"}} {
			_, derived, err := r.VerifyDerived(ctx, c.tok)
			if err != nil || derived != c.want {
				t.Fatalf("VerifyDerived = %v, %v; want derived %q", derived, err, c.want)
			}
		}
	}
	if a.keys.n != 1 || b.keys.n != 1 {
		t.Errorf("key lookups a %d b %d, want one each: repeats are cache hits", a.keys.n, b.keys.n)
	}
	for name, s := range map[string]token.CacheStats{"a": a.v.CacheStats(), "b": b.v.CacheStats()} {
		if s.Entries != 1 || s.Hits != 2 || s.Misses != 1 {
			t.Errorf("cache of %s = %+v, want its own token only: 1 entry, 2 hits, 1 miss", name, s)
		}
	}
}

func TestNewRouter(t *testing.T) {
	k := keys()
	a := newIssuer(t, "https://a.example.com", k.rsa, &k.rsa.PublicKey, jwa.RS256(), nil)
	a2 := newIssuer(t, "https://a.example.com", k.ec, &k.ec.PublicKey, jwa.ES256(), nil)
	none := newIssuer(t, "", k.ec, &k.ec.PublicKey, jwa.ES256(), nil)
	for name, vs := range map[string][]*token.Verifier{
		"no verifier": nil, "same issuer twice": {a.v, a2.v}, "no issuer": {a.v, none.v},
	} {
		if _, err := token.NewRouter(vs...); err == nil {
			t.Errorf("%s: NewRouter succeeded", name)
		}
	}
}

func TestUnverifiedIssuer(t *testing.T) {
	k := keys()
	tok := signClaims(hdr("RS256", "k", nil), with(map[string]any{"iss": "https://a.example.com"}), k.rsa)
	if iss, err := token.UnverifiedIssuer(tok); err != nil || iss != "https://a.example.com" {
		t.Errorf("UnverifiedIssuer = %q, %v", iss, err)
	}
	dup := "e30." + b64([]byte(`{"iss":"a","iss":"b"}`)) + ".sig"
	if _, err := token.UnverifiedIssuer(dup); reason.Of(err, "") != reason.TokenMalformed {
		t.Errorf("iss named twice: %v, want token-malformed", err)
	}
}

// BenchmarkRouter measures a token of the second of two issuers: cached
// (one hash, a lookup per issuer's cache) and verified in full (the
// payload's iss read, then the signature).
func BenchmarkRouter(b *testing.B) {
	k := keys()
	a := newIssuer(b, "https://a.example.com", k.rsa, &k.rsa.PublicKey, jwa.RS256(), nil)
	c := newIssuer(b, "https://b.example.com", k.ec, &k.ec.PublicKey, jwa.ES256(), nil)
	r, err := token.NewRouter(a.v, c.v)
	if err != nil {
		b.Fatal(err)
	}
	tok := c.token(map[string]any{"iss": c.iss})
	ctx := context.Background()
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := r.VerifyDerived(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("issuer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := token.UnverifiedIssuer(tok); err != nil {
				b.Fatal(err)
			}
		}
	})
}
