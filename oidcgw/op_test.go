package oidcgw_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testOP is an OpenID provider on loopback for the attacks a real one
// never makes: it signs the user in at once, and can answer with the
// nonce or the audience of someone else. Codes are single use and bound
// to their PKCE challenge, as a real provider's.
type testOP struct {
	*httptest.Server
	key    *ecdsa.PrivateKey
	client string

	mu    sync.Mutex
	codes map[string]grant
	// wrongNonce and audience make the next ID tokens misbehave.
	wrongNonce bool
	audience   string
	claims     map[string]any
	tokenCalls atomic.Int64
	jwksCalls  atomic.Int64
	// refreshCalls counts refresh_token grants; refreshDelay makes them
	// slow, failRefresh refuses them.
	refreshCalls atomic.Int64
	refreshDelay time.Duration
	failRefresh  atomic.Bool
	// unavailable answers refresh_token grants 503.
	unavailable atomic.Bool
	// tokenRedirect, when set, is where the token endpoint redirects
	// every post (307); discovery overrides members of the discovery
	// document.
	tokenRedirect string
	discovery     map[string]any
	// issParam: the provider names itself in its authorization responses
	// (iss, RFC 9207) and says so in its discovery document.
	issParam bool
}

type grant struct{ nonce, challenge, redirect string }

func newTestOP(t *testing.T, client string) *testOP {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	op := &testOP{key: key, client: client, codes: map[string]grant{},
		claims: map[string]any{"tenant_id": "acme", "roles": []string{"viewer"}, "email": "ann@acme.example", "sid": "sid-1"}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		u := op.URL
		doc := map[string]any{
			"issuer": u, "authorization_endpoint": u + "/authorize", "token_endpoint": u + "/token",
			"jwks_uri": u + "/jwks", "end_session_endpoint": u + "/session/end",
			"id_token_signing_alg_values_supported": []string{"ES256"},
			"response_types_supported":              []string{"code"}, "subject_types_supported": []string{"public"},
		}
		op.mu.Lock()
		if op.issParam {
			doc["authorization_response_iss_parameter_supported"] = true
		}
		maps.Copy(doc, op.discovery)
		op.mu.Unlock()
		_ = json.NewEncoder(w).Encode(doc)
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		op.jwksCalls.Add(1)
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != op.client || q.Get("code_challenge_method") != "S256" || q.Get("response_type") != "code" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		code := base64.RawURLEncoding.EncodeToString(sha256.New().Sum([]byte(q.Get("state") + time.Now().String())))
		op.mu.Lock()
		op.codes[code] = grant{nonce: q.Get("nonce"), challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri")}
		op.mu.Unlock()
		to, _ := url.Parse(q.Get("redirect_uri"))
		v := to.Query()
		v.Set("code", code)
		v.Set("state", q.Get("state"))
		op.mu.Lock()
		if op.issParam {
			v.Set("iss", op.URL)
		}
		op.mu.Unlock()
		to.RawQuery = v.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		op.tokenCalls.Add(1)
		op.mu.Lock()
		to := op.tokenRedirect
		op.mu.Unlock()
		if to != "" {
			http.Redirect(w, r, to, http.StatusTemporaryRedirect)
			return
		}
		_ = r.ParseForm()
		if r.PostForm.Get("grant_type") == "refresh_token" {
			op.refreshCalls.Add(1)
			time.Sleep(op.refreshDelay)
			w.Header().Set("Content-Type", "application/json")
			if op.unavailable.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":"temporarily_unavailable"}`))
				return
			}
			if op.failRefresh.Load() || r.PostForm.Get("refresh_token") != "rt-1" {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at2", "token_type": "Bearer", "expires_in": 300, "refresh_token": "rt-1"})
			return
		}
		op.mu.Lock()
		g, ok := op.codes[r.PostForm.Get("code")]
		delete(op.codes, r.PostForm.Get("code"))
		op.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge || r.PostForm.Get("redirect_uri") != g.redirect {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		op.mu.Lock()
		nonce, aud := g.nonce, op.client
		if op.wrongNonce {
			nonce = "another-sign-in"
		}
		if op.audience != "" {
			aud = op.audience
		}
		op.mu.Unlock()
		c := map[string]any{"nonce": nonce}
		for k, v := range op.claims {
			c[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"access_token": "at", "token_type": "Bearer", "expires_in": 300, "id_token": op.sign(t, aud, "ann", c),
			"refresh_token": "rt-1",
		})
	})
	op.Server = httptest.NewServer(mux)
	t.Cleanup(op.Close)
	return op
}

// sign returns a JWT of the provider for aud and sub with extra claims.
func (op *testOP) sign(t *testing.T, aud, sub string, extra map[string]any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: op.key, KeyID: "k1"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c := map[string]any{"iss": op.URL, "aud": aud, "sub": sub, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}
	for k, v := range extra {
		c[k] = v
	}
	raw, err := jwt.Signed(sig).Claims(c).Serialize()
	if err != nil {
		t.Error(err)
	}
	return raw
}

// wantRefreshes fails t unless want refresh_token grants reached the
// provider.
func (op *testOP) wantRefreshes(t *testing.T, want int64) {
	t.Helper()
	if n := op.refreshCalls.Load(); n != want {
		t.Errorf("%d refresh requests reached the provider, want %d", n, want)
	}
}
