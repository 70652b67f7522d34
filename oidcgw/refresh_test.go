package oidcgw_test

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/oidcgw"
)

// 50 concurrent requests of one expired session, spread over 3 replicas
// sharing Redis, refresh it with exactly one token request, behind a
// provider slower than a second; each gets the new session.
func TestRefreshOnceAcrossReplicas(t *testing.T) {
	op := newTestOP(t, "app")
	op.refreshDelay = 1500 * time.Millisecond
	rigs := refreshReplicas(t, op, 3)
	handle := signInForRefresh(t, rigs[0])

	var wg sync.WaitGroup
	codes := make(chan int, 50)
	sessions := make(chan string, 50)
	for i := range 50 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, rigs[i%3].url+"/auth/oidc/login?return_to=/orders", nil)
			req.AddCookie(&http.Cookie{Name: "svc_session_rt", Value: handle})
			res, err := browser(t).Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			codes <- res.StatusCode
			for _, c := range res.Cookies() {
				if c.Name == "svc_session" && c.Value != "" {
					sessions <- c.Value
				}
			}
		})
	}
	wg.Wait()
	close(codes)
	close(sessions)
	for c := range codes {
		if c != http.StatusSeeOther {
			t.Errorf("a request got %d, want 303 back to its page with the refreshed session", c)
		}
	}
	if n := len(sessions); n != 50 {
		t.Errorf("%d of 50 requests got a session", n)
	}
	op.wantRefreshes(t, 1)
}

// A refresh the provider refuses ends the session: the browser is sent
// to sign in again and loses its refresh cookie.
func TestRefreshFailureSignsInAgain(t *testing.T) {
	op := newTestOP(t, "app")
	r := newRigOf(t, op, func(c *config.Config) { c.SDK.OIDC.Scopes = []string{"openid", "offline_access"} })
	handle := signInForRefresh(t, r)
	op.failRefresh.Store(true)
	wantSignInAgain(t, loginWithRefresh(t, r, handle), op, "failed refresh")
}

// wantSignInAgain: res, a login's answer, sends the browser to sign in
// at op and clears the refresh cookie.
func wantSignInAgain(t *testing.T, res *http.Response, op *testOP, what string) {
	t.Helper()
	to, _ := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound || to == nil || to.Host != mustHost(t, op.URL) {
		t.Fatalf("%s: %d to %s, want 302 to the provider", what, res.StatusCode, res.Header.Get("Location"))
	}
	cleared := false
	for _, c := range res.Cookies() {
		cleared = cleared || c.Name == "svc_session_rt" && c.MaxAge < 0
	}
	if !cleared {
		t.Errorf("%s: the refresh cookie was not cleared: %v", what, res.Header["Set-Cookie"])
	}
}

// loginWithRefresh is the answer to a login of a browser that holds only
// the refresh cookie handle.
func loginWithRefresh(t *testing.T, r *rig, handle string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.url+"/auth/oidc/login?return_to=/orders", nil)
	req.AddCookie(&http.Cookie{Name: "svc_session_rt", Value: handle})
	res, err := browser(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// signedIn signs a new browser in at r and returns the callback's
// answer, a 303 with the session's cookies.
func signedIn(t *testing.T, r *rig) *http.Response {
	t.Helper()
	b := browser(t)
	res, body := get(t, b, r.toCallback(t, b, "/"))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", res.StatusCode, body)
	}
	return res
}

// signInForRefresh signs in at r and returns the refresh cookie's handle.
func signInForRefresh(t *testing.T, r *rig) string {
	t.Helper()
	res := signedIn(t, r)
	for _, c := range res.Cookies() {
		if c.Name == "svc_session_rt" && c.Value != "" {
			if !c.HttpOnly || c.Path != "/" {
				t.Errorf("refresh cookie %+v, want HttpOnly, Path /", c)
			}
			return c.Value
		}
	}
	t.Fatalf("no refresh cookie after a sign-in with offline_access: %v", res.Header["Set-Cookie"])
	return ""
}

func mustHost(t *testing.T, u string) string {
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host
}

// Logout ends what a refresh could bring back.
func TestLogoutEndsRefresh(t *testing.T) {
	op := newTestOP(t, "app")
	r := newRigOf(t, op, func(c *config.Config) { c.SDK.OIDC.Scopes = []string{"openid", "offline_access"} })
	handle := signInForRefresh(t, r)
	req, _ := http.NewRequest(http.MethodGet, r.url+"/auth/oidc/logout", nil)
	req.AddCookie(&http.Cookie{Name: "svc_session_rt", Value: handle})
	res, err := browser(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != op.URL+"/session/end?client_id=app" {
		t.Fatalf("logout: %d to %s, want 303 to the provider's end_session_endpoint", res.StatusCode, res.Header.Get("Location"))
	}
	req, _ = http.NewRequest(http.MethodGet, r.url+"/auth/oidc/login", nil)
	req.AddCookie(&http.Cookie{Name: "svc_session_rt", Value: handle})
	if res, err = browser(t).Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound || op.refreshCalls.Load() != 0 {
		t.Fatalf("login after logout: %d, %d refreshes; want a new sign-in", res.StatusCode, op.refreshCalls.Load())
	}
}

// A session the provider ended (back-channel logout) is not brought back
// by its refresh token, which a provider may keep valid past the logout
// (offline access): a refreshed session would carry the ended session's
// sid and be refused by every check, which sends the browser to the
// login, which would refresh again, in a loop. The login starts a new
// sign-in instead, without asking the provider, and drops the refresh
// cookie; so does the renewal before expiry.
func TestNoRefreshAfterBackchannelLogout(t *testing.T) {
	op := newTestOP(t, "app")
	r := newRigOf(t, op, func(c *config.Config) { c.SDK.OIDC.Scopes = []string{"openid", "offline_access"} })
	handle := signInForRefresh(t, r)
	events := map[string]any{oidcgw.BackchannelLogoutEvent: map[string]any{}}
	res, err := http.PostForm(r.url+"/auth/oidc/backchannel-logout", url.Values{"logout_token": {op.sign(t, "app", "ann", map[string]any{"sid": "sid-1", "events": events})}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("back-channel logout: %d", res.StatusCode)
	}
	if c := r.gw.RenewSession(t.Context(), "svc_session_rt="+handle, expiring(time.Minute)); c != "" && !clearsSession(c) {
		t.Errorf("renewal after the logout: %q, want no session", c)
	}
	wantSignInAgain(t, loginWithRefresh(t, r, handle), op, "login after the logout")
	if n := op.refreshCalls.Load(); n != 0 {
		t.Errorf("%d refresh requests reached the provider for an ended session, want none", n)
	}
}
