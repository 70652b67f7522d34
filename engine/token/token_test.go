package token_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/reason"
)

func TestVerify(t *testing.T) {
	k := keys()
	attackerIdP := newJWKSServer(t, jwksJSON(rsaJWK("evil", &k.attacker.PublicKey, "RS256")))
	attackerJKU := attackerIdP.Srv.URL + "/jwks.json"
	attackerJWK, err := jwk.Import(&k.attacker.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	valid := signClaims(hdr("RS256", "rsa", nil), claims(), k.rsa)
	parts := strings.Split(valid, ".")
	tampered := parts[0] + "." + b64(mustJSON(with(map[string]any{"tenant_id": "other"}))) + "." + parts[2]
	sigBytes := []byte(parts[2])
	// Another base64url letter: flipping a bit could yield a byte that is
	// not base64url at all ('-' becomes ',').
	if sigBytes[10] == 'A' {
		sigBytes[10] = 'B'
	} else {
		sigBytes[10] = 'A'
	}
	flippedSig := parts[0] + "." + parts[1] + "." + string(sigBytes)
	interop, err := jws.Sign(mustJSON(claims()), jws.WithKey(jwa.ES256(), k.ec, jws.WithProtectedHeaders(func() jws.Headers {
		h := jws.NewHeaders()
		_ = h.Set(jws.KeyIDKey, "ec")
		return h
	}())))
	if err != nil {
		t.Fatal(err)
	}

	globex := mustJSON(with(map[string]any{"tenant_id": "globex"}))
	dupTenant := append(globex[:len(globex)-1:len(globex)-1], `,"tenant_id":"acme"}`...)

	tests := []struct {
		name  string
		token string
		opts  func(*token.Options)
		want  reason.Code // reason.OK: verified
	}{
		{"valid RS256 on a key without alg", valid, nil, reason.OK},
		{"valid PS256 on a key without alg", signClaims(hdr("PS256", "rsa", nil), claims(), k.rsa), nil, reason.OK},
		{"valid RS256 on a RS256 key", signClaims(hdr("RS256", "rs", nil), claims(), k.rsaRS), nil, reason.OK},
		{"valid PS256 on a PS256 key", signClaims(hdr("PS256", "ps", nil), claims(), k.rsaPS), nil, reason.OK},
		{"valid ES256", signClaims(hdr("ES256", "ec", nil), claims(), k.ec), nil, reason.OK},
		{"valid ES256 signed by jwx", string(interop), nil, reason.OK},
		{"fractional exp", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"exp": json.Number("1767272400.5")}), k.rsa), nil, reason.OK},

		// Parsers differ on which of two same-named members counts.
		{"claims name tenant_id twice", sign(hdr("RS256", "rsa", nil), dupTenant, k.rsa), nil, reason.TokenMalformed},
		{"header names kid twice", signSegments("RS256", b64([]byte(`{"alg":"RS256","kid":"other","kid":"rsa"}`))+"."+parts[1], k.rsa), nil, reason.TokenMalformed},

		{"empty", "", nil, reason.TokenMissing},
		{"oversized", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"pad": strings.Repeat("x", 64<<10)}), k.rsa), nil, reason.TokenMalformed},
		{"two parts", parts[0] + "." + parts[1], nil, reason.TokenMalformed},
		{"four parts", valid + ".x", nil, reason.TokenMalformed},
		{"empty header", "." + parts[1] + "." + parts[2], nil, reason.TokenMalformed},
		{"header not base64url", "e30=." + parts[1] + "." + parts[2], nil, reason.TokenMalformed},
		{"header not json", b64([]byte("alg:RS256")) + "." + parts[1] + "." + parts[2], nil, reason.TokenMalformed},
		{"header json array", b64([]byte(`["RS256"]`)) + "." + parts[1] + "." + parts[2], nil, reason.TokenMalformed},
		{"header json null", b64([]byte(`null`)) + "." + parts[1] + "." + parts[2], nil, reason.TokenMalformed},
		{"alg missing", signClaims(map[string]any{"kid": "rsa"}, claims(), k.rsa), nil, reason.TokenMalformed},
		{"alg upper-case member name", signClaims(map[string]any{"ALG": "RS256", "kid": "rsa"}, claims(), k.rsa), nil, reason.TokenMalformed},
		{"kid not a string", signClaims(hdr("RS256", "", map[string]any{"kid": 7}), claims(), k.rsa), nil, reason.TokenMalformed},
		{"crit header", signClaims(hdr("RS256", "rsa", map[string]any{"crit": []string{"exp"}, "exp": 1}), claims(), k.rsa), nil, reason.TokenMalformed},
		{"b64 header", signClaims(hdr("RS256", "rsa", map[string]any{"b64": false}), claims(), k.rsa), nil, reason.TokenMalformed},
		{"payload not json", sign(hdr("RS256", "rsa", nil), []byte("sub=admin"), k.rsa), nil, reason.TokenMalformed},
		{"payload json array", sign(hdr("RS256", "rsa", nil), []byte(`[{"exp":1}]`), k.rsa), nil, reason.TokenMalformed},
		{"payload json null", sign(hdr("RS256", "rsa", nil), []byte(`null`), k.rsa), nil, reason.TokenMalformed},
		{"payload trailing data", sign(hdr("RS256", "rsa", nil), append(mustJSON(claims()), []byte(` {"x":1}`)...), k.rsa), nil, reason.TokenMalformed},
		{"exp missing", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"exp": nil}), k.rsa), nil, reason.TokenMalformed},
		{"exp a string", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"exp": "tomorrow"}), k.rsa), nil, reason.TokenMalformed},
		{"nbf a string", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"nbf": "yesterday"}), k.rsa), nil, reason.TokenMalformed},

		{"alg none", b64(mustJSON(hdr("none", "rsa", nil))) + "." + parts[1] + ".", nil, reason.AlgNotAllowed},
		{"alg None", b64(mustJSON(hdr("None", "rsa", nil))) + "." + parts[1] + ".", nil, reason.AlgNotAllowed},
		{"alg none with a signature", b64(mustJSON(hdr("none", "rsa", nil))) + "." + parts[1] + "." + parts[2], nil, reason.AlgNotAllowed},
		{"HS256 with the RSA public key as secret", signClaims(hdr("HS256", "rsa", nil), claims(), pubPEM), nil, reason.AlgNotAllowed},
		{"HS256 with the JWK n as secret", signClaims(hdr("HS256", "rsa", nil), claims(), []byte(b64(k.rsa.N.Bytes()))), nil, reason.AlgNotAllowed},
		{"RS512", signClaims(hdr("RS512", "rsa", nil), claims(), k.rsa), nil, reason.AlgNotAllowed},
		{"alg not a known name", signClaims(hdr("RS256\u0000", "rsa", nil), claims(), k.rsa), nil, reason.AlgNotAllowed},
		{"PS256 header on a RS256 key", signClaims(hdr("PS256", "rs", nil), claims(), k.rsaRS), nil, reason.AlgNotAllowed},
		{"RS256 header on a PS256 key", signClaims(hdr("RS256", "ps", nil), claims(), k.rsaPS), nil, reason.AlgNotAllowed},
		{"RS256 header on an EC key", signClaims(hdr("RS256", "ec", nil), claims(), k.rsa), nil, reason.AlgNotAllowed},
		{"ES256 header on an RSA key", signClaims(hdr("ES256", "rsa", nil), claims(), k.ec), nil, reason.AlgNotAllowed},

		{"unknown kid", signClaims(hdr("RS256", "nope", nil), claims(), k.rsa), nil, reason.UnknownKID},
		{"no kid among several keys", signClaims(hdr("RS256", "", nil), claims(), k.rsa), nil, reason.UnknownKID},
		{"1024-bit key", signClaims(hdr("RS256", "weak", nil), claims(), k.weak), nil, reason.KeyTooWeak},

		{"tampered payload", tampered, nil, reason.SignatureInvalid},
		{"tampered signature", flippedSig, nil, reason.SignatureInvalid},
		{"empty signature", parts[0] + "." + parts[1] + ".", nil, reason.SignatureInvalid},
		{"signature not base64url", parts[0] + "." + parts[1] + "." + parts[2][:20] + "+/" + parts[2][22:], nil, reason.TokenMalformed},
		{"ES256 signature one byte short", func() string {
			s := signClaims(hdr("ES256", "ec", nil), claims(), k.ec)
			p := strings.Split(s, ".")
			sig, _ := b64Decode(p[2])
			return p[0] + "." + p[1] + "." + b64(sig[:63])
		}(), nil, reason.SignatureInvalid},
		{"ES256 signature in DER", func() string {
			s := signClaims(hdr("ES256", "ec", nil), claims(), k.ec)
			p := strings.Split(s, ".")
			der, err := ecdsa.SignASN1(rand.Reader, k.ec, sha256Sum(p[0]+"."+p[1]))
			if err != nil {
				t.Fatal(err)
			}
			return p[0] + "." + p[1] + "." + b64(der)
		}(), nil, reason.SignatureInvalid},
		{"payload not base64url but signed", signSegments("RS256", b64(mustJSON(hdr("RS256", "rsa", nil)))+".e30=", k.rsa), nil, reason.TokenMalformed},
		{"signed by another key", signClaims(hdr("RS256", "rsa", nil), claims(), k.attacker), nil, reason.SignatureInvalid},
		{"RS256 signature under a PS256 header", func() string {
			// Same key, other padding: the header's alg must be honoured.
			s := signClaims(hdr("RS256", "rsa", nil), claims(), k.rsa)
			p := strings.Split(s, ".")
			return b64(mustJSON(hdr("PS256", "rsa", nil))) + "." + p[1] + "." + p[2]
		}(), nil, reason.SignatureInvalid},

		{"jku, x5u, jwk and x5c ignored", signClaims(hdr("RS256", "rsa", map[string]any{"jku": attackerJKU, "x5u": attackerJKU, "jwk": attackerJWK, "x5c": []string{b64(pubDER)}}), claims(), k.rsa), nil, reason.OK},
		{"attacker key with jku to its JWKS", signClaims(hdr("RS256", "evil", map[string]any{"jku": attackerJKU}), claims(), k.attacker), nil, reason.UnknownKID},
		{"attacker key with embedded jwk and a known kid", signClaims(hdr("RS256", "rsa", map[string]any{"jwk": attackerJWK, "jku": attackerJKU, "x5u": attackerJKU}), claims(), k.attacker), nil, reason.SignatureInvalid},

		{"expired within skew", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"exp": t0.Add(-29 * time.Second).Unix()}), k.rsa), nil, reason.OK},
		{"expired beyond skew", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"exp": t0.Add(-31 * time.Second).Unix()}), k.rsa), nil, reason.TokenExpired},
		{"expired beyond a custom skew", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"exp": t0.Add(-6 * time.Second).Unix()}), k.rsa), func(o *token.Options) { o.Skew = 5 * time.Second }, reason.TokenExpired},
		{"nbf within skew", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"nbf": t0.Add(29 * time.Second).Unix()}), k.rsa), nil, reason.OK},
		{"nbf beyond skew", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"nbf": t0.Add(31 * time.Second).Unix()}), k.rsa), nil, reason.TokenNotYetValid},
		{"iat within skew", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"iat": t0.Add(29 * time.Second).Unix()}), k.rsa), nil, reason.OK},
		{"iat beyond skew", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"iat": t0.Add(31 * time.Second).Unix()}), k.rsa), nil, reason.TokenIssuedInFuture},
		{"exp far future", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"exp": json.Number("1e400")}), k.rsa), nil, reason.OK},

		{"tenant missing", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"tenant_id": nil}), k.rsa), nil, reason.TenantMissing},
		{"tenant empty", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"tenant_id": ""}), k.rsa), nil, reason.TenantMissing},
		{"tenant a number", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"tenant_id": 7}), k.rsa), nil, reason.TenantMissing},
		{"custom tenant claim", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"tenant_id": nil, "org_id": "acme"}), k.rsa), func(o *token.Options) { o.TenantClaim = "org_id" }, reason.OK},

		{"issuer matches", valid, func(o *token.Options) { o.Issuer = "https://idp.example.com" }, reason.OK},
		{"issuer differs", valid, func(o *token.Options) { o.Issuer = "https://other.example.com" }, reason.IssuerMismatch},
		{"issuer missing", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"iss": nil}), k.rsa), func(o *token.Options) { o.Issuer = "https://idp.example.com" }, reason.IssuerMismatch},
		{"audience string matches", valid, func(o *token.Options) { o.Audiences = []string{"other", "svc"} }, reason.OK},
		{"audience array matches", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"aud": []any{"x", "svc"}}), k.rsa), func(o *token.Options) { o.Audiences = []string{"svc"} }, reason.OK},
		{"audience differs", valid, func(o *token.Options) { o.Audiences = []string{"billing"} }, reason.AudienceMismatch},
		{"audience missing", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"aud": nil}), k.rsa), func(o *token.Options) { o.Audiences = []string{"svc"} }, reason.AudienceMismatch},
		// Bound to its client's key (RFC 8705 §3.1, RFC 9449 §6.1): no
		// bearer request proves possession of it.
		{"certificate-bound", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"cnf": map[string]any{"x5t#S256": "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2"}}), k.rsa), nil, reason.TokenBound},
		{"DPoP-bound", signClaims(hdr("RS256", "rsa", nil), with(map[string]any{"cnf": map[string]any{"jkt": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}}), k.rsa), nil, reason.TokenBound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.opts)
			got, err := f.v.Verify(context.Background(), tt.token)
			if code := reason.Of(err, reason.OK); code != tt.want {
				t.Fatalf("Verify() code = %q (%v), want %q", code, err, tt.want)
			}
			if err != nil {
				var re *reason.Error
				if !asReason(err, &re) {
					t.Fatalf("error %v is not a *reason.Error", err)
				}
				if got != nil {
					t.Fatalf("claims returned with an error: %v", got)
				}
				if tt.token != "" && strings.Contains(err.Error(), tt.token[:min(len(tt.token), 20)]) {
					t.Fatalf("error %q holds token material", err)
				}
				return
			}
			// Every claim survives untouched, numbers exactly as sent.
			payload := strings.Split(tt.token, ".")[1]
			want := decodeSegment(t, payload)
			if diff := cmp.Diff(map[string]any(want), map[string]any(got)); diff != "" {
				t.Fatalf("claims differ (-token +got):\n%s", diff)
			}
		})
	}
	if n := attackerIdP.Requests(); n != 0 {
		t.Fatalf("attacker JWKS got %d requests, want 0", n)
	}
}

func asReason(err error, re **reason.Error) bool {
	e, ok := err.(*reason.Error)
	*re = e
	return ok
}

func decodeSegment(t *testing.T, seg string) token.Claims {
	t.Helper()
	raw, err := b64Decode(seg)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var c token.Claims
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClaimsRoundTrip(t *testing.T) {
	f := newFixture(t, nil)
	payload := []byte(`{"big":123456789012345678901234567890,"exp":1767272400,"f":1.50,"iat":1767268740,"org":{"id":42},"tenant_id":"acme"}`)
	got, err := f.v.Verify(context.Background(), sign(hdr("ES256", "ec", nil), payload, keys().ec))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, payload) {
		t.Fatalf("claims marshal to\n%s\nwant\n%s", out, payload)
	}
	if _, ok := got["exp"].(json.Number); !ok {
		t.Fatalf("exp is %T, want json.Number", got["exp"])
	}
	clone := got.Clone()
	clone["org"].(map[string]any)["id"] = "changed"
	if got["org"].(map[string]any)["id"] != json.Number("42") {
		t.Fatal("Clone shares nested maps with the original")
	}
	if got.String("tenant_id") != "acme" || got.String("exp") != "" {
		t.Fatal("Claims.String")
	}
}

func TestNewOptions(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name string
		opts token.Options
		ok   bool
	}{
		{"defaults", token.Options{Keys: f.cache}, true},
		{"no keys", token.Options{}, false},
		{"negative skew", token.Options{Keys: f.cache, Skew: -time.Second}, false},
		{"huge skew", token.Options{Keys: f.cache, Skew: 2 * time.Hour}, false},
		{"empty audience", token.Options{Keys: f.cache, Audiences: []string{""}}, false},
		{"cache disabled", token.Options{Keys: f.cache, CacheSize: -1}, true},
		{"negative cache max age", token.Options{Keys: f.cache, CacheMaxAge: -time.Second}, false},
		{"empty allowed typ", token.Options{Keys: f.cache, AllowedTyp: []string{" "}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := token.New(tt.opts); (err == nil) != tt.ok {
				t.Fatalf("New() err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func sha256Sum(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

func TestAllowedTyp(t *testing.T) {
	k := keys()
	withTyp := func(typ any) string {
		h := hdr("RS256", "rsa", nil)
		if typ == nil {
			delete(h, "typ")
		} else {
			h["typ"] = typ
		}
		return signClaims(h, claims(), k.rsa)
	}
	tests := []struct {
		name    string
		allowed []string
		token   string
		want    reason.Code
	}{
		{"any typ when unset", nil, withTyp("JWT"), reason.OK},
		{"no typ when unset", nil, withTyp(nil), reason.OK},
		{"access token", []string{"at+jwt"}, withTyp("at+jwt"), reason.OK},
		{"case-insensitive, application/ optional", []string{"at+jwt"}, withTyp("application/AT+JWT"), reason.OK},
		{"configured with application/", []string{"application/at+jwt"}, withTyp("at+jwt"), reason.OK},
		{"ID token refused", []string{"at+jwt"}, withTyp("JWT"), reason.TypNotAllowed},
		{"token without typ refused", []string{"at+jwt"}, withTyp(nil), reason.TypNotAllowed},
		{"typ not a string", []string{"at+jwt"}, withTyp(7), reason.TokenMalformed},
		{"one of several", []string{"at+jwt", "jwt"}, withTyp("JWT"), reason.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(o *token.Options) { o.AllowedTyp = tt.allowed })
			_, err := f.v.Verify(context.Background(), tt.token)
			if got := reason.Of(err, reason.OK); got != tt.want {
				t.Fatalf("Verify = %v, want %s", err, tt.want)
			}
		})
	}
}
