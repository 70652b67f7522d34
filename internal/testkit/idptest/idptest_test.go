package idptest_test

import (
	"context"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/svc-dev/svc/internal/testkit/idptest"
)

// TestTokenVerifiesAgainstJWKS checks the hand-made tokens with an
// independent JWT library, over plain http and over TLS.
func TestTokenVerifiesAgainstJWKS(t *testing.T) {
	tests := []struct {
		name string
		opts []idptest.Option
	}{
		{"http", nil},
		{"tls", []idptest.Option{idptest.WithTLS()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := idptest.New(t, tc.opts...)
			ctx := context.Background()
			set, err := jwk.Fetch(ctx, p.JWKSURL(), jwk.WithHTTPClient(p.Client()))
			if err != nil {
				t.Fatalf("fetch jwks: %v", err)
			}
			key, ok := set.LookupKeyID(idptest.KID)
			if !ok {
				t.Fatalf("jwks has no key %q", idptest.KID)
			}
			if alg, _ := key.Algorithm(); alg.String() != "RS256" {
				t.Errorf("jwk alg = %q, want RS256", alg)
			}
			tok, err := jwt.Parse([]byte(p.Token(t, idptest.Claims("alice", "acme", "viewer"))), jwt.WithKeySet(set))
			if err != nil {
				t.Fatalf("verify token: %v", err)
			}
			if sub, _ := tok.Subject(); sub != "alice" {
				t.Errorf("sub = %q, want alice", sub)
			}
		})
	}
}

func TestJWKSOtherPathsAndClose(t *testing.T) {
	p := idptest.New(t)
	c := p.Client()
	get := func(url string) (int, error) {
		resp, err := c.Get(url)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get(p.JWKSURL() + "/x"); err != nil || code != http.StatusNotFound {
		t.Errorf("GET other path = %d, %v; want 404", code, err)
	}
	p.Close()
	if _, err := get(p.JWKSURL()); err == nil {
		t.Error("GET after Close: no error")
	}
}

func TestClaims(t *testing.T) {
	before := time.Now().Unix()
	c := idptest.Claims("bob", "globex")
	if roles, _ := c["roles"].([]string); roles == nil {
		t.Errorf("roles = %#v, want an empty, non-nil list", c["roles"])
	}
	iat, _ := c["iat"].(int64)
	exp, _ := c["exp"].(int64)
	if iat < before || exp-iat != 300 {
		t.Errorf("iat=%d exp=%d; want iat now and exp five minutes later", iat, exp)
	}
}

func TestOverride(t *testing.T) {
	tests := []struct {
		name       string
		base, over map[string]any
		want       map[string]any
	}{
		{"replaces and adds", map[string]any{"a": 1, "b": 2}, map[string]any{"b": 3, "c": 4}, map[string]any{"a": 1, "b": 3, "c": 4}},
		{"nil removes", map[string]any{"a": 1, "b": 2}, map[string]any{"a": nil}, map[string]any{"b": 2}},
		{"nil base", nil, map[string]any{"a": 1}, map[string]any{"a": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := maps.Clone(tc.base)
			got := idptest.Override(tc.base, tc.over)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Override (-want +got):\n%s", diff)
			}
			if tc.base != nil {
				if diff := cmp.Diff(base, tc.base); diff != "" {
					t.Errorf("Override changed base (-before +after):\n%s", diff)
				}
			}
		})
	}
}
