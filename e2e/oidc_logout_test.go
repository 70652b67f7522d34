package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

// TestOIDCLogoutEndsSession signs in with the real OpenID provider and
// logs out at the sidecar (no end-session at the provider, no
// back-channel logout): every session token of the sign-in is refused
// by every check from then on, presented again as a cookie to Envoy's
// Check and to the HTTP /check, and as a bearer token to
// /v1/authorize: the one the cookie carried at the logout, and a copy
// of the one from before the check that renewed it (offline_access, in
// the refresh window from the start).
func TestOIDCLogoutEndsSession(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	signin := harness.FreeAddr(t)
	base := "http://" + signin
	client := harness.IDPClient{ID: "orders-web", Secret: "web-secret-0123456789abcdef", TenantID: "acme",
		Roles: []string{"viewer"}, RedirectURIs: []string{base + "/auth/oidc/callback"}}
	idp := harness.StartIDP(t, idpResource, 5*time.Minute, client)
	s := startSidecar(t, k, map[string]string{
		"SVC_SIGNIN_ADDR":             signin,
		"SVC_OIDC_ISSUER_URL":         idp.Issuer,
		"SVC_OIDC_CLIENT_ID":          client.ID,
		"SVC_OIDC_CLIENT_SECRET_FILE": harness.WriteFile(t, t.TempDir(), "client-secret", client.Secret+"\n"),
		"SVC_OIDC_REDIRECT_URL":       base + "/auth/oidc/callback",
		"SVC_OIDC_SCOPES":             "openid,offline_access",
		// In the refresh window 2 s after the sign-in.
		"SVC_SESSION_TOKEN_TTL":      "60s",
		"SVC_SESSION_REFRESH_BEFORE": "58s",
	})
	b := newBrowser()
	followBrowser(t, b, base+"/auth/oidc/login?return_to=/orders/1")
	first := jarSession(t, b, signin)
	refresh := ""
	for _, c := range b.Jar.Cookies(&url.URL{Scheme: "http", Host: signin, Path: "/"}) {
		if c.Name == "svc_session_rt" {
			refresh = c.Value
		}
	}
	if refresh == "" {
		t.Fatal("no refresh cookie after a sign-in with offline_access")
	}

	// checks asks each check path about session; it returns what each
	// answered: "allowed", or the refusal's reason.
	checks := func(session string) map[string]string {
		out := map[string]string{}
		r := envoyCheckHeaders(t, s, http.MethodGet, "/orders/1", map[string]string{"cookie": "svc_session=" + session, "accept": "application/json"}, nil)
		out["Envoy Check"] = answer(r.status, r.body)
		req, _ := http.NewRequest(http.MethodGet, s.URL("/check"), nil)
		req.Header.Set("X-Original-URI", "/orders/1")
		req.Header.Set("X_Svc_Method", http.MethodGet)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Cookie", "svc_session="+session)
		status, _, body := harness.Do(t, req)
		out["HTTP /check"] = answer(status, string(body))
		req, _ = http.NewRequest(http.MethodPost, s.URL("/v1/authorize"), strings.NewReader(`{"action":"orders:read"}`))
		req.Header.Set("Authorization", "Bearer "+session)
		req.Header.Set("Content-Type", "application/json")
		status, _, body = harness.Do(t, req)
		if status == http.StatusOK && strings.Contains(string(body), `"allowed":true`) {
			out["/v1/authorize"] = "allowed"
		} else {
			out["/v1/authorize"] = answer(http.StatusUnauthorized, string(body))
		}
		return out
	}
	for path, got := range checks(first) {
		if got != "allowed" {
			t.Fatalf("%s before the logout: %s, want allowed", path, got)
		}
	}

	// A request with the refresh cookie, in the window, renews the
	// session (X-Svc-Set-Cookie on the HTTP check's answer); the browser
	// takes the new token, and a copy of the first stays valid.
	renewed := ""
	testkit.EventuallyWithin(t, 20*time.Second, "a check to renew the session", func() bool {
		req, _ := http.NewRequest(http.MethodGet, s.URL("/check"), nil)
		req.Header.Set("X-Original-URI", "/orders/1")
		req.Header.Set("X_Svc_Method", http.MethodGet)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Cookie", "svc_session="+first+"; svc_session_rt="+refresh)
		_, h, _ := harness.Do(t, req)
		if c, err := http.ParseSetCookie(h.Get("X-Svc-Set-Cookie")); err == nil && c.Name == "svc_session" && c.Value != "" {
			renewed = c.Value
		}
		return renewed != ""
	})
	if renewed == first {
		t.Fatal("the renewal handed back the same token")
	}
	b.Jar.SetCookies(&url.URL{Scheme: "http", Host: signin, Path: "/"}, []*http.Cookie{{Name: "svc_session", Value: renewed, Path: "/"}})
	for path, got := range checks(renewed) {
		if got != "allowed" {
			t.Fatalf("%s, the renewed session before the logout: %s, want allowed", path, got)
		}
	}

	req, _ := http.NewRequest(http.MethodPost, base+"/auth/oidc/logout", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("logout: %d, want 204", resp.StatusCode)
	}
	for what, session := range map[string]string{"the renewed session": renewed, "a copy from before the renewal": first} {
		for path, got := range checks(session) {
			if !strings.Contains(got, "oidc-session-revoked") {
				t.Errorf("%s, %s after the logout: %s, want refused oidc-session-revoked", path, what, got)
			}
		}
	}
}

// answer is "allowed" for a 200, else the status and body.
func answer(status int, body string) string {
	if status == http.StatusOK {
		return "allowed"
	}
	return http.StatusText(status) + " " + body
}
