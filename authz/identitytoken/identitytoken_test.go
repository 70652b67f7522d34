package identitytoken_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/identitytoken"
	"github.com/svc-dev/svc/engine/idtoken"
	"github.com/svc-dev/svc/internal/testkit"
)

// sidecarKeys serves a minter's key set as the sidecar does.
func sidecarKeys(t *testing.T, m *idtoken.Minter) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		doc, err := m.JWKS()
		if err != nil {
			t.Error(err)
		}
		_, _ = w.Write(doc)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestMiddlewareVerifiesIdentity: the middleware admits a request on the
// sidecar's identity token alone (no Authorizer), and refuses a missing,
// forged, expired-key or misaddressed one.
func TestMiddlewareVerifiesIdentity(t *testing.T) {
	keyFile := testkit.TokenKeyFile(t)
	m, err := idtoken.New(idtoken.Options{KeyFile: keyFile, TTL: time.Minute, Issuer: "svc-sidecar"})
	if err != nil {
		t.Fatal(err)
	}
	keys := sidecarKeys(t, m)
	v, err := identitytoken.New(identitytoken.Options{JWKSURL: keys.URL, Audience: "orders", Issuer: "svc-sidecar"})
	if err != nil {
		t.Fatal(err)
	}
	app := authz.Middleware(nil, authz.MiddlewareOptions{Identity: v})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := authz.UserFrom(r.Context())
		_ = json.NewEncoder(w).Encode(u)
	}))
	mint := func(cred, aud string) string {
		tok, err := m.Token(cred, idtoken.Claims{Subject: "alice", TenantID: "acme", Roles: []string{"viewer"}, Kind: "jwt", Audience: aud, DecisionID: "d-1"})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	other, err := idtoken.New(idtoken.Options{KeyFile: testkit.TokenKeyFile(t), TTL: time.Minute, Issuer: "svc-sidecar"})
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := other.Token("x", idtoken.Claims{Subject: "root", TenantID: "acme", Audience: "orders"})

	serve := func(tok string) (int, authz.User, authz.DenyBody) {
		req := httptest.NewRequest(http.MethodGet, "/orders/1", nil)
		if tok != "" {
			req.Header.Set(authz.HeaderIdentity, tok)
		}
		rec := httptest.NewRecorder()
		app.ServeHTTP(rec, req)
		var u authz.User
		var deny authz.DenyBody
		if rec.Code == http.StatusOK {
			_ = json.Unmarshal(rec.Body.Bytes(), &u)
		} else {
			_ = json.Unmarshal(rec.Body.Bytes(), &deny)
		}
		return rec.Code, u, deny
	}
	cases := []struct {
		name       string
		token      string
		wantStatus int
		wantReason string
	}{
		{"valid", mint("c1", "orders"), http.StatusOK, ""},
		{"missing", "", http.StatusUnauthorized, "token-missing"},
		{"signed by another key", forged, http.StatusUnauthorized, "signature-invalid"},
		{"for another service", mint("c1", "billing"), http.StatusUnauthorized, "audience-mismatch"},
		{"not a token", "garbage", http.StatusUnauthorized, "signature-invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, u, deny := serve(tc.token)
			if code != tc.wantStatus {
				t.Fatalf("status %d, want %d (%+v)", code, tc.wantStatus, deny)
			}
			if code == http.StatusOK {
				if u.Subject != "alice" || u.TenantID != "acme" || u.DecisionID != "d-1" || u.Reason != "ok" {
					t.Errorf("user %+v", u)
				}
				return
			}
			if deny.Reason != tc.wantReason {
				t.Errorf("reason %q, want %q", deny.Reason, tc.wantReason)
			}
		})
	}

	t.Run("a rotated key verifies once fetched", func(t *testing.T) {
		next, err := os.ReadFile(testkit.TokenKeyFile(t))
		if err != nil {
			t.Fatal(err)
		}
		testkit.WriteFile(t, keyFile, next)
		if _, err := m.Reload(); err != nil {
			t.Fatal(err)
		}
		// The verifier's set is fresh (under MinRefetch): wait for the
		// refetch a token of an unknown key may cause.
		tok := mint("c2", "orders")
		testkit.Eventually(t, "the new key's token verifies", func() bool {
			code, _, _ := serve(tok)
			return code == http.StatusOK
		})
	})

	t.Run("no keys is 503", func(t *testing.T) {
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		v, _ := identitytoken.New(identitytoken.Options{JWKSURL: down.URL, Audience: "orders"})
		h := authz.Middleware(nil, authz.MiddlewareOptions{Identity: v})(http.NotFoundHandler())
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set(authz.HeaderIdentity, mint("c3", "orders"))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("status %d, want 503: %s", rec.Code, rec.Body)
		}
	})
}
