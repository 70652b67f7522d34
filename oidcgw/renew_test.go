package oidcgw_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/oidcgw"
	"github.com/svc-dev/svc/reason"
)

// expiring are the claims of a session token that expires in d.
func expiring(d time.Duration) map[string]any {
	return map[string]any{"sub": "ann", "idp": "default", "exp": json.Number(strconv.FormatInt(time.Now().Add(d).Unix(), 10))}
}

func refreshScopes(c *config.Config) {
	c.SDK.OIDC.Scopes = []string{"openid", "email", "offline_access"}
}

// refreshRig is a gateway of op asking for a refresh token, and the
// handle of a session signed in on it.
func refreshRig(t *testing.T, op *testOP) (*rig, string) {
	t.Helper()
	r := newRigOf(t, op, refreshScopes)
	return r, signInForRefresh(t, r)
}

// refreshReplicas are n gateways of op asking for a refresh token and
// sharing a Redis, as replicas do.
func refreshReplicas(t *testing.T, op *testOP, n int) []*rig {
	t.Helper()
	addr := redistest.Start(t)
	rigs := make([]*rig, n)
	for i := range rigs {
		rigs[i] = newRigOf(t, op, func(c *config.Config) { c.RateLimit.RedisAddr = addr; refreshScopes(c) })
	}
	return rigs
}

// sessionOf is the session token of a Set-Cookie value; "" for another
// cookie or a cleared one.
func sessionOf(t *testing.T, setCookie string) string {
	t.Helper()
	if setCookie == "" {
		return ""
	}
	c, err := http.ParseSetCookie(setCookie)
	if err != nil {
		t.Fatalf("Set-Cookie %q: %v", setCookie, err)
	}
	if c.Name != "svc_session" || !c.HttpOnly || c.Path != "/" || c.SameSite != http.SameSiteLaxMode {
		t.Errorf("Set-Cookie %q, want svc_session, HttpOnly, Path=/, SameSite=Lax", setCookie)
	}
	return c.Value
}

// 50 concurrent checks of one session within its refresh window, spread
// over 3 replicas sharing Redis, refresh it with exactly one token
// request; none waits on another, and every later check of the old
// session, on any replica, gets the new one.
func TestRenewSessionOnceAcrossReplicas(t *testing.T) {
	op := newTestOP(t, "app")
	op.refreshDelay = 100 * time.Millisecond
	rigs := refreshReplicas(t, op, 3)
	handle := signInForRefresh(t, rigs[0])
	cookies := "svc_session=old; svc_session_rt=" + handle
	claims := expiring(time.Minute)

	var wg sync.WaitGroup
	got := make(chan string, 50)
	slowest := make(chan time.Duration, 50)
	for i := range 50 {
		wg.Go(func() {
			start := time.Now()
			c := rigs[i%3].gw.RenewSession(t.Context(), cookies, claims)
			slowest <- time.Since(start)
			if clearsSession(c) {
				t.Error("the session was cleared")
			}
			got <- c
		})
	}
	wg.Wait()
	close(got)
	close(slowest)
	delivered := 0
	for c := range got {
		if c != "" {
			delivered++
			sessionOf(t, c)
		}
	}
	if delivered == 0 {
		t.Error("no check got the renewed session")
	}
	for d := range slowest {
		if d > oidcgw.RenewWait+time.Second {
			t.Errorf("a check waited %s", d)
		}
	}
	if n := op.refreshCalls.Load(); n != 1 {
		t.Fatalf("%d refresh requests reached the provider, want exactly 1", n)
	}
	var token string
	for _, r := range rigs {
		c := r.gw.RenewSession(t.Context(), cookies, claims)
		tok := sessionOf(t, c)
		if tok == "" || token != "" && tok != token {
			t.Fatalf("a later check of the old session got %q, want the one renewed session", c)
		}
		token = tok
	}
	verified := false
	for _, r := range rigs {
		jwks, _ := r.is.JWKS()
		if c, err := testkit.VerifyJWT(jwks, token); err == nil {
			verified = true
			exp, _ := c["exp"].(time.Time)
			if old, _ := claims["exp"].(json.Number).Int64(); exp.Unix() <= old {
				t.Errorf("renewed session expires at %v, not after the old one (%d)", exp, old)
			}
			if c["tenant_id"] != "acme" || c["sub"] != "ann" {
				t.Errorf("renewed session claims %v", c)
			}
		}
	}
	if !verified {
		t.Error("the renewed session does not verify")
	}
	op.wantRefreshes(t, 1)
}

// A provider slower than RenewWait does not hold the check up: it
// answers without the new session, and a later check gets it.
func TestRenewSessionSlowProvider(t *testing.T) {
	op := newTestOP(t, "app")
	op.refreshDelay = 800 * time.Millisecond
	r, handle := refreshRig(t, op)
	cookies := "svc_session_rt=" + handle
	claims := expiring(time.Minute)
	start := time.Now()
	if c := r.gw.RenewSession(t.Context(), cookies, claims); c != "" {
		t.Fatalf("first check got %q, want nothing yet", c)
	}
	if d := time.Since(start); d > oidcgw.RenewWait+200*time.Millisecond {
		t.Errorf("the check waited %s for a slow provider", d)
	}
	testkit.EventuallyWithin(t, 3*time.Second, "a check to get the renewed session", func() bool {
		return sessionOf(t, r.gw.RenewSession(t.Context(), cookies, claims)) != ""
	})
	op.wantRefreshes(t, 1)
}

// A refresh the provider refuses ends the session: the check gets the
// cleared session cookie, and the sign-in is revoked: every token of it
// (its session id), a copy from before a renewal too, or, for a token
// minted before session ids, that token (its jti). Every later check of
// it gets the same, without asking the provider again; the login then
// signs in anew.
func TestRenewSessionRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		// token, an earlier token of its sign-in, and a token of
		// another sign-in of the user.
		token, earlier, other map[string]any
	}{
		{"session id",
			map[string]any{"jti": "token-1", oidcgw.SessionIDClaim: "s1"},
			map[string]any{"jti": "token-0", oidcgw.SessionIDClaim: "s1"},
			map[string]any{"jti": "token-2", oidcgw.SessionIDClaim: "s2"}},
		{"no session id",
			map[string]any{"jti": "token-1"}, nil,
			map[string]any{"jti": "token-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := newTestOP(t, "app")
			r, handle := refreshRig(t, op)
			op.failRefresh.Store(true)
			cookies := "svc_session=old; svc_session_rt=" + handle
			claims := func(c map[string]any) map[string]any {
				out := expiring(time.Minute)
				maps.Copy(out, c)
				return out
			}
			token := claims(tc.token)
			for i := range 2 {
				c := r.gw.RenewSession(t.Context(), cookies, token)
				sc, err := http.ParseSetCookie(c)
				if err != nil || sc.Name != "svc_session" || sc.MaxAge >= 0 || sc.Value != "" {
					t.Fatalf("check %d: %q, want the session cookie cleared", i, c)
				}
			}
			op.wantRefreshes(t, 1)
			// The sign-in is refused where checks decide; another sign-in
			// of the same user is not.
			if revoked, err := r.gw.Revoked(t.Context(), token); !revoked || err != nil {
				t.Errorf("Revoked(the refused token) = %v, %v; want true", revoked, err)
			}
			if tc.earlier != nil {
				if revoked, err := r.gw.Revoked(t.Context(), claims(tc.earlier)); !revoked || err != nil {
					t.Errorf("Revoked(an earlier token of the sign-in) = %v, %v; want true", revoked, err)
				}
			}
			if revoked, err := r.gw.Revoked(t.Context(), claims(tc.other)); revoked || err != nil {
				t.Errorf("Revoked(another sign-in of the user) = %v, %v; want false", revoked, err)
			}
			res := loginWithRefresh(t, r, handle)
			if to, _ := url.Parse(res.Header.Get("Location")); res.StatusCode != http.StatusFound || to.Host != mustHost(t, op.URL) {
				t.Fatalf("login after a refused refresh: %d to %s, want a new sign-in", res.StatusCode, res.Header.Get("Location"))
			}
			op.wantRefreshes(t, 1)
		})
	}
}

// A provider that cannot be reached does not end the session: the check
// goes on without a new one, no refresh is tried for a while, and the
// refresh token is kept for later.
func TestRenewSessionProviderDown(t *testing.T) {
	op := newTestOP(t, "app")
	r, handle := refreshRig(t, op)
	op.unavailable.Store(true)
	cookies := "svc_session_rt=" + handle
	for range 3 {
		if c := r.gw.RenewSession(t.Context(), cookies, expiring(time.Minute)); c != "" {
			t.Fatalf("provider down: %q, want the session to go on", c)
		}
	}
	if n := op.refreshCalls.Load(); n != 1 {
		t.Errorf("%d refresh requests while the provider is down, want 1 (then a pause)", n)
	}
	op.unavailable.Store(false)
	res := loginWithRefresh(t, r, handle)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("refresh once the provider is back: %d, want 303 with a session", res.StatusCode)
	}
}

// Without a refresh cookie, or with a forged one, nothing is renewed and
// the provider is not asked.
func TestRenewSessionWithoutRefreshCookie(t *testing.T) {
	op := newTestOP(t, "app")
	r, _ := refreshRig(t, op)
	for _, cookies := range []string{"", "svc_session=x", "svc_session_rt=forged", "svc_session_rt=" + strings.Repeat("A", 43)} {
		if c := r.gw.RenewSession(t.Context(), cookies, expiring(time.Minute)); c != "" {
			t.Errorf("cookies %q: %q", cookies, c)
		}
	}
	op.wantRefreshes(t, 0)
}

// ?tenant= narrows the login to the tenant's providers; it never picks
// another tenant's provider, and a session's tenant is always its
// provider's (or its ID token's), whatever the login named.
func TestLoginTenantOnlyNarrows(t *testing.T) {
	globex := newTestOP(t, "app")
	globex.claims["tenant_id"] = "globex"
	r := newRig(t, func(c *config.Config) {
		c.SDK.OIDC.Providers = []config.OIDCProvider{
			{Name: "globex", Tenant: "globex", IssuerURL: globex.URL, ClientID: "app"},
			{Name: "initech", Tenant: "initech", IssuerURL: "https://login.initech.example", ClientID: "app"},
		}
	})
	// acme: the default provider (no tenant) only: straight through.
	res, _ := get(t, browser(t), r.url+"/auth/oidc/login?tenant=acme")
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), r.op.URL) {
		t.Fatalf("tenant acme: %d %s, want 302 to its provider", res.StatusCode, res.Header.Get("Location"))
	}
	// globex: its provider and the tenant-less one, not initech's.
	res, body := get(t, browser(t), r.url+"/auth/oidc/login?tenant=globex")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "provider=globex") || strings.Contains(body, "initech") {
		t.Fatalf("tenant globex: %d %s", res.StatusCode, body)
	}
	// Another tenant's provider by name: refused.
	if res, body := get(t, browser(t), r.url+"/auth/oidc/login?tenant=acme&provider=globex"); refusal(t, body) != reason.OIDCUnknownProvider {
		t.Fatalf("acme through globex's provider: %d %s", res.StatusCode, body)
	}
	// A login named for globex through the tenant-less provider: the
	// session is the provider's ID token's tenant (acme), not globex.
	b := browser(t)
	res, body = get(t, b, r.url+"/auth/oidc/login?tenant=globex&provider=default&return_to=/x")
	if res.StatusCode != http.StatusFound {
		t.Fatalf("login: %d %s", res.StatusCode, body)
	}
	res, _ = get(t, b, res.Header.Get("Location"))
	res, body = get(t, b, res.Header.Get("Location"))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("callback: %d %s", res.StatusCode, body)
	}
	jwks, _ := r.is.JWKS()
	for _, c := range res.Cookies() {
		if c.Name == "svc_session" && c.Value != "" {
			claims, err := testkit.VerifyJWT(jwks, c.Value)
			if err != nil || claims["tenant_id"] != "acme" {
				t.Fatalf("session %v %v, want tenant acme", claims, err)
			}
			return
		}
	}
	t.Fatal("no session")
}

// clearsSession reports whether the Set-Cookie value c clears a cookie.
func clearsSession(c string) bool {
	sc, err := http.ParseSetCookie(c)
	return err == nil && sc.MaxAge < 0
}
