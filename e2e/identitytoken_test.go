package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

// verifyingUpstream is the protected service: it verifies X-Svc-Identity
// against the sidecar's /.well-known/jwks.json, as an upstream would,
// and answers with the token's claims, or 401 when it does not verify.
type verifyingUpstream struct {
	addr   string
	forged atomic.Int64 // requests that arrived with the client's forged header
}

const forgedIdentity = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJyb290In0."

func startVerifyingUpstream(t *testing.T, jwksURL string) *verifyingUpstream {
	t.Helper()
	u := &verifyingUpstream{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw := r.Header.Get("X-Svc-Identity")
		if raw == forgedIdentity {
			u.forged.Add(1)
		}
		// Fetched on every request: a rotated key must verify at once.
		set, err := jwk.Fetch(r.Context(), jwksURL)
		if err != nil {
			http.Error(w, "jwks: "+err.Error(), http.StatusBadGateway)
			return
		}
		tok, err := jwt.ParseString(raw, jwt.WithKeySet(set), jwt.WithAudience(r.Host))
		if err != nil {
			http.Error(w, "identity: "+err.Error(), http.StatusUnauthorized)
			return
		}
		claims := map[string]any{}
		for _, k := range tok.Keys() {
			var v any
			if tok.Get(k, &v) == nil {
				claims[k] = v
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(claims)
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	u.addr = lis.Addr().String()
	return u
}

// identityNginx is the identity-token part of the shipped nginx.conf: the
// check names the host (X-Forwarded-Host), and proxy_set_header copies
// X-Svc-Identity over whatever the client sent.
func identityNginx(t *testing.T, sidecarHTTP, upstream string) *harness.Proxy {
	return harness.StartNginxServer(t, func(addr string) string {
		return fmt.Sprintf(`
    server {
        listen %s;
        location = /_svc_check {
            internal;
            proxy_pass http://%s/check;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Original-URI   $request_uri;
            proxy_set_header X_Svc_Method     $request_method;
            proxy_set_header X-Forwarded-Host $host;
        }
        location / {
            auth_request /_svc_check;
            auth_request_set $svc_identity $upstream_http_x_svc_identity;
            proxy_set_header X-Svc-Identity $svc_identity;
            proxy_set_header Host $host;
            proxy_pass http://%s;
        }
    }`, addr, sidecarHTTP, upstream)
	})
}

// TestIdentityToken: behind real nginx, a real upstream verifies the
// sidecar's x-svc-identity against its JWKS; a client's forged copy never
// reaches it; an Envoy Check gets the token in its OK response; and a
// new key file taken on SIGHUP signs from then on while the old key
// stays published.
func TestIdentityToken(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	keyFile := testkit.TokenKeyFile(t)
	s := startSidecar(t, k, map[string]string{
		"SVC_IDENTITY_TOKEN_SIGNING_KEY_FILE": keyFile,
		"SVC_IDENTITY_TOKEN_TTL":              "2m",
	})
	up := startVerifyingUpstream(t, s.URL("/.well-known/jwks.json"))
	px := identityNginx(t, s.HTTPAddr, up.addr)
	viewer := k.token(t, "alice", "acme", "viewer")

	get := func(t *testing.T, headers map[string]string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, px.URL+"/orders/42", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "orders.internal"
		for h, v := range headers {
			req.Header.Set(h, v)
		}
		status, h, body := harness.Do(t, req)
		var claims map[string]any
		if status == http.StatusOK {
			if err := json.Unmarshal(body, &claims); err != nil {
				t.Fatalf("upstream answer %s: %v", body, err)
			}
		} else {
			t.Logf("%s", harness.Describe(status, h, body))
		}
		return status, claims
	}

	t.Run("the upstream verifies the token nginx forwards", func(t *testing.T) {
		status, claims := get(t, map[string]string{"Authorization": "Bearer " + viewer, "X-Svc-Identity": forgedIdentity})
		if status != http.StatusOK {
			t.Fatalf("status %d, want 200", status)
		}
		if claims["sub"] != "alice" || claims["tenant_id"] != "acme" || claims["decision_id"] == "" {
			t.Errorf("claims %v", claims)
		}
		if roles, _ := claims["roles"].([]any); len(roles) != 1 || roles[0] != "viewer" {
			t.Errorf("roles %v, want [viewer]", claims["roles"])
		}
		if up.forged.Load() != 0 {
			t.Error("the client's forged X-Svc-Identity reached the upstream")
		}
	})

	t.Run("a refused request never reaches the upstream with the forged header", func(t *testing.T) {
		if status, _ := get(t, map[string]string{"X-Svc-Identity": forgedIdentity}); status != http.StatusUnauthorized {
			t.Errorf("status %d, want 401", status)
		}
		if up.forged.Load() != 0 {
			t.Error("the client's forged X-Svc-Identity reached the upstream")
		}
	})

	t.Run("an Envoy Check carries the token in its OK response", func(t *testing.T) {
		r := envoyCheckHeaders(t, s, http.MethodGet, "/orders/42",
			map[string]string{"authorization": "Bearer " + viewer, "x-svc-identity": forgedIdentity}, nil)
		if r.status != http.StatusOK {
			t.Fatalf("Check: %d %s", r.status, r.body)
		}
		tok := r.headers["x-svc-identity"]
		if tok == "" || tok == forgedIdentity {
			t.Fatalf("x-svc-identity = %q", tok)
		}
		if _, err := verifyAgainst(t, s, tok, "api.example.test"); err != nil {
			t.Errorf("the Check's token does not verify for its host: %v", err)
		}
	})

	t.Run("rotation on SIGHUP keeps the old key published", func(t *testing.T) {
		r := envoyCheck(t, s, http.MethodGet, "/orders/1", viewer, nil)
		old := r.headers["x-svc-identity"]
		next, err := os.ReadFile(testkit.TokenKeyFile(t))
		if err != nil {
			t.Fatal(err)
		}
		// A new file in place, the way a secret is updated: the old
		// content until the rename.
		tmp := keyFile + ".new"
		testkit.WriteFile(t, tmp, next)
		if err := os.Rename(tmp, keyFile); err != nil {
			t.Fatal(err)
		}
		if err := s.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		var fresh string
		testkit.Eventually(t, "a token of the new key", func() bool {
			fresh = envoyCheck(t, s, http.MethodGet, "/orders/1", viewer, nil).headers["x-svc-identity"]
			return fresh != old && fresh != ""
		})
		for name, tok := range map[string]string{"old": old, "new": fresh} {
			if _, err := verifyAgainst(t, s, tok, "api.example.test"); err != nil {
				t.Errorf("the %s key's token does not verify after the rotation: %v", name, err)
			}
		}
		set := fetchJWKS(t, s)
		if set.Len() != 2 {
			t.Errorf("%d keys published after the rotation, want the new and the old", set.Len())
		}
		if status, claims := get(t, map[string]string{"Authorization": "Bearer " + viewer}); status != http.StatusOK || claims["sub"] != "alice" {
			t.Errorf("through nginx after the rotation: %d %v", status, claims)
		}
	})
}

func fetchJWKS(t *testing.T, s *harness.Sidecar) jwk.Set {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	set, err := jwk.Fetch(ctx, s.URL("/.well-known/jwks.json"))
	if err != nil {
		t.Fatalf("GET /.well-known/jwks.json: %v", err)
	}
	return set
}

func verifyAgainst(t *testing.T, s *harness.Sidecar, tok, aud string) (jwt.Token, error) {
	t.Helper()
	return jwt.ParseString(tok, jwt.WithKeySet(fetchJWKS(t, s)), jwt.WithAudience(aud))
}
