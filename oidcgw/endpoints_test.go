package oidcgw_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/reason"
)

// thief is a listener that counts what reaches it and answers as a token
// endpoint would.
func thief(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"at","token_type":"Bearer","expires_in":300,"refresh_token":"rt-1"}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// The token endpoint's redirect is not followed: the post carries the
// client's credentials, the code and its verifier (or a refresh token),
// which a 307 resends to whatever the Location names.
func TestTokenEndpointRedirectNotFollowed(t *testing.T) {
	t.Run("code exchange", func(t *testing.T) {
		steal, stolen := thief(t)
		r := newRig(t, nil)
		b := browser(t)
		cb := r.toCallback(t, b, "/")
		r.op.mu.Lock()
		r.op.tokenRedirect = steal.URL + "/steal"
		r.op.mu.Unlock()
		res, body := get(t, b, cb)
		if res.StatusCode != http.StatusServiceUnavailable || refusal(t, body) != reason.OIDCProviderUnavailable {
			t.Fatalf("callback: %d %s, want 503 %s", res.StatusCode, body, reason.OIDCProviderUnavailable)
		}
		if n := stolen.Load(); n != 0 {
			t.Fatalf("the redirect was followed: %d posts reached its target", n)
		}
		if !strings.Contains(body, "307") || strings.Contains(body, "steal") {
			t.Errorf("refusal %s: want the status, not the Location", body)
		}
	})
	t.Run("refresh", func(t *testing.T) {
		steal, stolen := thief(t)
		op := newTestOP(t, "app")
		r, handle := refreshRig(t, op)
		op.mu.Lock()
		op.tokenRedirect = steal.URL + "/steal"
		op.mu.Unlock()
		if c := r.gw.RenewSession(t.Context(), "svc_session_rt="+handle, expiring(time.Minute)); c != "" {
			t.Fatalf("renewed through a redirect: %q", c)
		}
		if n := stolen.Load(); n != 0 {
			t.Fatalf("the redirect was followed: %d posts reached its target", n)
		}
		// A misplaced endpoint is an outage, not a refusal: the refresh
		// token is kept for when the provider is back.
		op.mu.Lock()
		op.tokenRedirect = ""
		op.mu.Unlock()
		if res := loginWithRefresh(t, r, handle); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("refresh once the endpoint answers: %d, want 303 with a session", res.StatusCode)
		}
	})
}

// Every endpoint of the discovery document the gateway uses must be https,
// or http on loopback, as the issuer URL: a document naming plain http
// elsewhere is refused, and the gateway never signs in through it.
func TestDiscoveryRefusesInsecureEndpoints(t *testing.T) {
	for _, tt := range []struct {
		name, member, value string
	}{
		{"token endpoint over http", "token_endpoint", "http://op.example.com/token"},
		{"keys over http", "jwks_uri", "http://op.example.com/jwks"},
		{"authorization over http", "authorization_endpoint", "http://op.example.com/authorize"},
		{"end session over http", "end_session_endpoint", "http://op.example.com/logout"},
		{"token endpoint with credentials", "token_endpoint", "https://user:pw@op.example.com/token"},
		{"relative token endpoint", "token_endpoint", "/token"},
		{"no token endpoint", "token_endpoint", ""},
		{"no jwks_uri", "jwks_uri", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			op := newTestOP(t, "app")
			op.discovery = map[string]any{tt.member: tt.value}
			r := newRigOf(t, op, nil)
			res, body := get(t, browser(t), r.url+"/auth/oidc/login")
			if res.StatusCode != http.StatusServiceUnavailable || refusal(t, body) != reason.OIDCProviderUnavailable {
				t.Fatalf("login: %d %s, want 503 %s", res.StatusCode, body, reason.OIDCProviderUnavailable)
			}
			st := r.gw.Status().Providers[0]
			if !strings.Contains(st.LastError, tt.member) || strings.Contains(st.LastError, "pw") || st.Discovered != nil {
				t.Errorf("status %+v: want the member named in last_error, no password, not discovered", st)
			}
		})
	}
	t.Run("https elsewhere", func(t *testing.T) {
		op := newTestOP(t, "app")
		op.discovery = map[string]any{
			"authorization_endpoint": "https://op.example.com/authorize", "token_endpoint": "https://op.example.com/token",
			"jwks_uri": "https://op.example.com/jwks", "end_session_endpoint": "https://op.example.com/logout",
		}
		r := newRigOf(t, op, nil)
		res, body := get(t, browser(t), r.url+"/auth/oidc/login")
		if res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), "https://op.example.com/authorize?") {
			t.Fatalf("login: %d %s %s, want 302 to the https authorization endpoint", res.StatusCode, res.Header.Get("Location"), body)
		}
	})
}
