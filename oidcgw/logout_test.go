package oidcgw_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/oidcgw"
	"github.com/svc-dev/svc/reason"
)

// signInClaims signs a browser in on r and returns its session token's
// claims as the checks hand them to Revoked (numbers as json.Number).
func signInClaims(t *testing.T, r *rig) map[string]any {
	t.Helper()
	_, claims := signInSession(t, r)
	return claims
}

// signInSession signs a browser in on r and returns its session cookie
// (name=value) and the token's claims.
func signInSession(t *testing.T, r *rig) (string, map[string]any) {
	t.Helper()
	res := signedIn(t, r)
	for _, c := range res.Cookies() {
		if c.Name != "svc_session" || c.Value == "" {
			continue
		}
		return c.Name + "=" + c.Value, tokenClaims(t, c.Value)
	}
	t.Fatalf("no session cookie in %v", res.Header["Set-Cookie"])
	return "", nil
}

// tokenClaims are the claims of a session token as the checks hand them
// to Revoked (numbers as json.Number).
func tokenClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("session token %q is not a JWS", token)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var claims map[string]any
	if err := dec.Decode(&claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

// OpenID Connect Back-Channel Logout 1.0 §2.6: a logout token with a sid
// ends that session of the provider alone, whatever sub it carries; one
// with a sub alone ends the sessions of that user that began before it,
// never a later sign-in.
func TestBackchannelLogoutScope(t *testing.T) {
	stores := map[string]func(*config.Config){"memory": nil}
	if addr := redistest.Start(t); addr != "" {
		stores["redis"] = func(c *config.Config) { c.RateLimit.RedisAddr = addr }
	}
	events := map[string]any{oidcgw.BackchannelLogoutEvent: map[string]any{}}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			// The gateway's clock also checks the provider's tokens, which
			// are valid for 5 minutes from now: it moves by seconds.
			clk := testkit.NewClock(time.Now())
			op := newTestOP(t, "app")
			r := newRigWith(t, op, httptest.NewServer, store, oidcgw.Deps{Now: clk.Now})
			logout := func(t *testing.T, claims map[string]any) {
				t.Helper()
				claims["events"] = events
				// Issued now on the gateway's clock, which the provider's
				// keeps to: a logout by sub dates from its iat.
				claims["iat"] = clk.Now().Unix()
				res, err := http.PostForm(r.url+"/auth/oidc/backchannel-logout", url.Values{"logout_token": {op.sign(t, "app", "ann", claims)}})
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					t.Fatalf("logout: %d", res.StatusCode)
				}
				// A replica trusts a "not revoked" answer of Redis for
				// 500 ms.
				clk.Advance(time.Second)
			}
			revoked := r.revoked

			signedIn := signInClaims(t, r) // ann, sid-1 (the test provider's)
			if _, ok := signedIn["auth_time"].(json.Number); !ok {
				t.Fatalf("session claims %v: no auth_time", signedIn)
			}
			otherSID := map[string]any{"idp": "default", "idp_sid": "sid-2", "sub": "ann", "auth_time": signedIn["auth_time"]}
			noSID := map[string]any{"idp": "default", "sub": "ann", "auth_time": signedIn["auth_time"]}

			// sid and sub: the session of that sid alone.
			clk.Advance(10 * time.Second)
			logout(t, map[string]any{"sid": "sid-1", "jti": "l1"})
			if !revoked(t, signedIn) {
				t.Error("sid and sub: the session of that sid is not revoked")
			}
			for name, s := range map[string]map[string]any{"another sid": otherSID, "no sid": noSID} {
				if revoked(t, s) {
					t.Errorf("sid and sub: the user's session with %s is revoked", name)
				}
			}
			// A new sign-in after it is not locked out.
			clk.Advance(10 * time.Second)
			op.mu.Lock()
			op.claims["sid"] = "sid-3"
			op.mu.Unlock()
			if again := signInClaims(t, r); revoked(t, again) {
				t.Error("sid and sub: a sign-in after the logout is revoked")
			}

			// sub alone: every session of the user that began by then.
			clk.Advance(10 * time.Second)
			before := signInClaims(t, r)
			legacy := map[string]any{"idp": "default", "idp_sid": "sid-4", "sub": "ann"}
			bob := map[string]any{"idp": "default", "idp_sid": "sid-5", "sub": "bob", "auth_time": signedIn["auth_time"]}
			clk.Advance(10 * time.Second)
			logout(t, map[string]any{"jti": "l2"})
			for name, s := range map[string]map[string]any{"signed in before": before, "another sid": otherSID,
				"no sid": noSID, "no auth_time": legacy} {
				if !revoked(t, s) {
					t.Errorf("sub alone: the user's session (%s) is not revoked", name)
				}
			}
			if revoked(t, bob) {
				t.Error("sub alone: another user's session is revoked")
			}
			clk.Advance(10 * time.Second)
			if after := signInClaims(t, r); revoked(t, after) {
				t.Error("sub alone: a sign-in after the logout is revoked (locked out for token_ttl)")
			}
		})
	}
}

func TestBackchannelLogout(t *testing.T) {
	r := newRig(t, nil)
	post := func(token string) (*http.Response, string) {
		res, err := http.PostForm(r.url+"/auth/oidc/backchannel-logout", url.Values{"logout_token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	session := map[string]any{"idp": "default", "idp_sid": "sid-9", "sub": "bob"}
	if revoked, err := r.gw.Revoked(t.Context(), session); err != nil || revoked {
		t.Fatalf("before logout: %v %v", revoked, err)
	}
	events := map[string]any{oidcgw.BackchannelLogoutEvent: map[string]any{}}
	for name, tok := range map[string]string{
		"no events":      r.op.sign(t, "app", "bob", map[string]any{"sid": "sid-9", "jti": "1"}),
		"a nonce":        r.op.sign(t, "app", "bob", map[string]any{"sid": "sid-9", "events": events, "nonce": "n"}),
		"other audience": r.op.sign(t, "other", "bob", map[string]any{"sid": "sid-9", "events": events}),
		"not a JWT":      "x.y.z",
	} {
		if res, body := post(tok); res.StatusCode != http.StatusBadRequest || refusal(t, body) != reason.OIDCLogoutTokenInvalid {
			t.Errorf("%s: %d %s", name, res.StatusCode, body)
		}
	}
	if revoked, _ := r.gw.Revoked(t.Context(), session); revoked {
		t.Fatal("a refused logout token revoked the session")
	}
	if res, body := post(r.op.sign(t, "app", "bob", map[string]any{"sid": "sid-9", "events": events, "jti": "2"})); res.StatusCode != http.StatusOK {
		t.Fatalf("logout: %d %s", res.StatusCode, body)
	}
	if revoked, err := r.gw.Revoked(t.Context(), session); err != nil || !revoked {
		t.Fatalf("after logout: revoked %v %v", revoked, err)
	}
	if revoked, _ := r.gw.Revoked(t.Context(), map[string]any{"idp": "default", "idp_sid": "sid-10", "sub": "carl"}); revoked {
		t.Error("another session was revoked")
	}
}

// With Redis, a logout taken by one replica is enforced by every other
// within a second, even one that checked the session just before.
func TestBackchannelLogoutReachesReplicas(t *testing.T) {
	addr := redistest.Start(t)
	op := newTestOP(t, "app")
	var gws []*oidcgw.Gateway
	var urls []string
	for range 3 {
		r := newRigOf(t, op, func(c *config.Config) { c.RateLimit.RedisAddr = addr })
		gws, urls = append(gws, r.gw), append(urls, r.url)
	}
	if st := gws[1].Status(); !st.SharedState || st.LogoutScope != "replicas" {
		t.Fatalf("status %+v, want shared state and logout scope replicas", st)
	}
	session := map[string]any{"idp": "default", "idp_sid": "sid-r", "sub": "ann"}
	for _, gw := range gws[1:] {
		if revoked, err := gw.Revoked(t.Context(), session); err != nil || revoked {
			t.Fatalf("before: %v %v", revoked, err)
		}
	}
	events := map[string]any{oidcgw.BackchannelLogoutEvent: map[string]any{}}
	res, err := http.PostForm(urls[0]+"/auth/oidc/backchannel-logout", url.Values{"logout_token": {op.sign(t, "app", "ann", map[string]any{"sid": "sid-r", "events": events})}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("logout: %d", res.StatusCode)
	}
	start := time.Now()
	for _, gw := range gws[1:] {
		testkit.EventuallyWithin(t, time.Second, "the logout reaches the replica", func() bool {
			revoked, _ := gw.Revoked(t.Context(), session)
			return revoked
		})
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the logout took %s to reach every replica", d)
	}
}

// A logout at the gateway ends the session, not only its cookie: the
// token the cookie carried is refused by every check from then on, even
// presented again (a request in flight, a copied cookie). Another
// session of the user goes on, and a cookie that is not a token of the
// gateway's revokes nothing.
func TestLogoutRevokesSession(t *testing.T) {
	r := newRig(t, nil)
	logout := func(t *testing.T, method, cookie string) {
		t.Helper()
		req, _ := http.NewRequest(method, r.url+"/auth/oidc/logout", nil)
		req.Header.Set("Cookie", cookie)
		if res, body := testkit.Do(t, browser(t), req); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("logout: %d %s", res.StatusCode, body)
		}
	}
	revoked := r.revoked
	_, other := signInSession(t, r)
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"idp":"default","jti":"x"}`))
	logout(t, http.MethodGet, "svc_session=eyJhbGciOiJub25lIn0."+forged+".")
	if revoked(t, map[string]any{"idp": "default", "jti": "x", "sub": "ann"}) {
		t.Error("an unsigned cookie revoked the token it names")
	}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			cookie, claims := signInSession(t, r)
			if revoked(t, claims) {
				t.Fatal("revoked before the logout")
			}
			logout(t, method, cookie)
			if !revoked(t, claims) {
				t.Error("the session token still passes after the logout")
			}
		})
	}
	// A token minted before session ids has none: its own jti is
	// revoked, and another such token of the user goes on.
	t.Run("no session id", func(t *testing.T) {
		mint := func() (string, map[string]any) {
			tok, _, err := r.is.Issue(map[string]any{"idp": "default", "sub": "ann", "tenant_id": "acme"})
			if err != nil {
				t.Fatal(err)
			}
			return tok, tokenClaims(t, tok)
		}
		tok, claims := mint()
		_, another := mint()
		if _, ok := claims[oidcgw.SessionIDClaim]; ok {
			t.Fatalf("claims %v", claims)
		}
		logout(t, http.MethodPost, "svc_session="+tok)
		if !revoked(t, claims) {
			t.Error("the token without a session id still passes after the logout")
		}
		if revoked(t, another) {
			t.Error("the logout of a token without a session id ended another")
		}
	})
	if revoked(t, other) {
		t.Error("the logout of one session ended another")
	}
}

// A session is renewed before it expires, and a copy of a token from
// before a renewal (a request in flight, a copied cookie) would pass
// every check until its own expiry. A logout with the latest token ends
// the sign-in, every token of it; the user's other sign-in goes on.
func TestLogoutEndsRenewedAwayTokens(t *testing.T) {
	stores := map[string]func(*config.Config){"memory": refreshScopes}
	if addr := redistest.Start(t); addr != "" {
		stores["redis"] = func(c *config.Config) { c.RateLimit.RedisAddr = addr; refreshScopes(c) }
	}
	for name, edit := range stores {
		t.Run(name, func(t *testing.T) {
			r := newRigOf(t, newTestOP(t, "app"), edit)
			revoked := r.revoked
			var session, handle string
			for _, c := range signedIn(t, r).Cookies() {
				switch c.Name {
				case "svc_session":
					session = c.Value
				case "svc_session_rt":
					handle = c.Value
				}
			}
			copied := tokenClaims(t, session)
			id, _ := copied[oidcgw.SessionIDClaim].(string)
			if id == "" || handle == "" {
				t.Fatalf("sign-in: claims %v, refresh handle %q; want a session id and a handle", copied, handle)
			}
			_, other := signInSession(t, r)

			// A check within the refresh window renews the session.
			inWindow := maps.Clone(copied)
			inWindow["exp"] = json.Number(strconv.FormatInt(time.Now().Add(time.Minute).Unix(), 10))
			cookies := "svc_session=" + session + "; svc_session_rt=" + handle
			var renewed string
			testkit.EventuallyWithin(t, 3*time.Second, "a check to get the renewed session", func() bool {
				renewed = sessionOf(t, r.gw.RenewSession(t.Context(), cookies, inWindow))
				return renewed != ""
			})
			latest := tokenClaims(t, renewed)
			if latest[oidcgw.SessionIDClaim] != id || latest["jti"] == copied["jti"] {
				t.Fatalf("renewed claims %v, want the session id %s and a new jti", latest, id)
			}
			if revoked(t, copied) || revoked(t, latest) {
				t.Fatal("revoked before the logout")
			}

			req, _ := http.NewRequest(http.MethodPost, r.url+"/auth/oidc/logout", nil)
			req.Header.Set("Cookie", "svc_session="+renewed+"; svc_session_rt="+handle)
			if res, body := testkit.Do(t, browser(t), req); res.StatusCode != http.StatusSeeOther {
				t.Fatalf("logout: %d %s", res.StatusCode, body)
			}
			for what, claims := range map[string]map[string]any{"the renewed token": latest, "a copy from before the renewal": copied} {
				if !revoked(t, claims) {
					t.Errorf("%s still passes after the logout", what)
				}
			}
			if revoked(t, other) {
				t.Error("the logout ended the user's other sign-in")
			}
		})
	}
}

// Two providers may be two clients of one identity provider (one per
// tenant, at one issuer): a logout token names its client in aud, and
// ends the sessions of that provider, whichever comes first in the
// configuration.
func TestBackchannelLogoutSharedIssuer(t *testing.T) {
	r := newRig(t, func(c *config.Config) {
		c.SDK.OIDC.Providers = []config.OIDCProvider{{Name: "globex", Tenant: "globex", IssuerURL: c.SDK.OIDC.IssuerURL, ClientID: "globex-app"}}
	})
	events := map[string]any{oidcgw.BackchannelLogoutEvent: map[string]any{}}
	for _, tc := range []struct{ provider, client string }{{"globex", "globex-app"}, {"default", "app"}} {
		t.Run(tc.provider, func(t *testing.T) {
			sid := "sid-of-" + tc.provider
			res, err := http.PostForm(r.url+"/auth/oidc/backchannel-logout", url.Values{"logout_token": {r.op.sign(t, tc.client, "ann", map[string]any{"sid": sid, "events": events})}})
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("logout token for %s: %d, want 200", tc.client, res.StatusCode)
			}
			session := map[string]any{"idp": tc.provider, "idp_sid": sid, "sub": "ann"}
			if revoked, err := r.gw.Revoked(t.Context(), session); err != nil || !revoked {
				t.Errorf("the %s session: revoked %v %v", tc.provider, revoked, err)
			}
		})
	}
	res, err := http.PostForm(r.url+"/auth/oidc/backchannel-logout", url.Values{"logout_token": {r.op.sign(t, "another-app", "ann", map[string]any{"sid": "x", "events": events})}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("logout token for a client of no provider: %d, want 400", res.StatusCode)
	}
}

// postLogout posts a logout token to the back-channel logout endpoint
// at base; it returns the status and the body.
func postLogout(t *testing.T, base, token string) (int, string) {
	t.Helper()
	res, err := http.PostForm(base+"/auth/oidc/backchannel-logout", url.Values{"logout_token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// A captured logout token by sub, posted again later, is answered as
// its first post was (200: its logout is done) and changes nothing: the
// sessions of the user signed in after the logout go on. Where the
// token was never taken (another process's memory, a restart), it ends
// no session signed in after its iat and the clock skew: a logout by
// sub dates from its iat, not from when it arrived.
func TestBackchannelLogoutReplay(t *testing.T) {
	stores := map[string]func(*config.Config){"memory": nil}
	if addr := redistest.Start(t); addr != "" {
		stores["redis"] = func(c *config.Config) { c.RateLimit.RedisAddr = addr }
	}
	events := map[string]any{oidcgw.BackchannelLogoutEvent: map[string]any{}}
	for name, store := range stores {
		for _, jti := range []string{"l1", ""} {
			t.Run(name+"/jti "+jti, func(t *testing.T) {
				// The provider's tokens are valid for 5 minutes from now:
				// the gateways' clock moves by seconds.
				clk := testkit.NewClock(time.Now())
				op := newTestOP(t, "app")
				r := newRigWith(t, op, httptest.NewServer, store, oidcgw.Deps{Now: clk.Now})
				// Another process, without Redis: it never saw the token.
				elsewhere := newRigWith(t, op, httptest.NewServer, nil, oidcgw.Deps{Now: clk.Now})

				before := signInClaims(t, r)
				clk.Advance(10 * time.Second)
				claims := map[string]any{"events": events, "iat": clk.Now().Unix()}
				if jti != "" {
					claims["jti"] = jti
				}
				token := op.sign(t, "app", "ann", claims)
				if status, body := postLogout(t, r.url, token); status != http.StatusOK {
					t.Fatalf("logout: %d %s", status, body)
				}
				if !r.revoked(t, before) {
					t.Fatal("the session signed in before the logout is not revoked")
				}

				// Signed in after the logout: within the clock skew allowed
				// for the token's iat, and past it. (Each past the 500 ms a
				// replica trusts Redis's "not revoked".)
				clk.Advance(10 * time.Second)
				soon := signInClaims(t, r)
				clk.Advance(time.Minute)
				later := signInClaims(t, r)
				clk.Advance(10 * time.Second)
				for range 2 {
					if status, body := postLogout(t, r.url, token); status != http.StatusOK {
						t.Fatalf("replay: %d %s, want 200 (done already)", status, body)
					}
				}
				for what, s := range map[string]map[string]any{"soon": soon, "later": later} {
					if r.revoked(t, s) {
						t.Errorf("the replayed logout token ended a session signed in %s after the logout", what)
					}
				}
				if !r.revoked(t, before) {
					t.Error("the replay undid the logout")
				}

				if status, body := postLogout(t, elsewhere.url, token); status != http.StatusOK {
					t.Fatalf("the token where it was never taken: %d %s", status, body)
				}
				if elsewhere.revoked(t, later) {
					t.Error("where the token was never taken, it ended a session signed in past the clock skew after the logout")
				}
				if !elsewhere.revoked(t, before) {
					t.Error("where the token was never taken, it did not end the session signed in before it")
				}
			})
		}
	}
}

// A logout token must have been issued within LogoutTokenMaxAge, give
// or take jwt.clock_skew (30 s by default): a stale one, or one from the
// future, is refused, whatever its exp, and revokes nothing.
func TestBackchannelLogoutFreshness(t *testing.T) {
	r := newRig(t, nil)
	events := map[string]any{oidcgw.BackchannelLogoutEvent: map[string]any{}}
	now := time.Now()
	for _, tc := range []struct {
		name   string
		iat    any
		status int
	}{
		{"stale", now.Add(-oidcgw.LogoutTokenMaxAge - time.Minute).Unix(), http.StatusBadRequest},
		{"from the future", now.Add(2 * time.Minute).Unix(), http.StatusBadRequest},
		{"no iat", nil, http.StatusBadRequest},
		{"within the skew ahead", now.Add(10 * time.Second).Unix(), http.StatusOK},
		{"a few minutes old", now.Add(-oidcgw.LogoutTokenMaxAge + time.Minute).Unix(), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sid := "sid-" + strings.ReplaceAll(tc.name, " ", "-")
			c := map[string]any{"sid": sid, "events": events, "jti": sid, "exp": now.Add(time.Hour).Unix(), "iat": tc.iat}
			status, body := postLogout(t, r.url, r.op.sign(t, "app", "ann", c))
			if status != tc.status {
				t.Fatalf("%d %s, want %d", status, body, tc.status)
			}
			if status != http.StatusOK && refusal(t, body) != reason.OIDCLogoutTokenInvalid {
				t.Errorf("refusal %s, want %s", body, reason.OIDCLogoutTokenInvalid)
			}
			got, err := r.gw.Revoked(t.Context(), map[string]any{"idp": "default", "idp_sid": sid, "sub": "ann"})
			if err != nil || got != (tc.status == http.StatusOK) {
				t.Errorf("session revoked %v %v after a %d", got, err, status)
			}
		})
	}
}

// failingStore fails the next write of a revocation when fail is set.
type failingStore struct {
	oidcgw.Store
	fail atomic.Bool
}

func (s *failingStore) Put(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if strings.HasPrefix(key, "svc:oidc:revoked:") && s.fail.CompareAndSwap(true, false) {
		return errors.New("the store is down")
	}
	return s.Store.Put(ctx, key, value, ttl)
}

// A logout token whose logout could not be recorded is not taken: the
// provider's resend of it is, and ends the session.
func TestBackchannelLogoutResendAfterFailure(t *testing.T) {
	store := &failingStore{Store: oidcgw.NewMemoryStore(nil)}
	op := newTestOP(t, "app")
	r := newRigWith(t, op, httptest.NewServer, nil, oidcgw.Deps{Store: store})
	events := map[string]any{oidcgw.BackchannelLogoutEvent: map[string]any{}}
	token := op.sign(t, "app", "ann", map[string]any{"sid": "sid-f", "events": events, "jti": "f1"})
	session := map[string]any{"idp": "default", "idp_sid": "sid-f", "sub": "ann"}
	store.fail.Store(true)
	if status, body := postLogout(t, r.url, token); status != http.StatusServiceUnavailable || refusal(t, body) != reason.OIDCStoreUnavailable {
		t.Fatalf("logout with the store down: %d %s, want 503 %s", status, body, reason.OIDCStoreUnavailable)
	}
	if got, _ := r.gw.Revoked(t.Context(), session); got {
		t.Fatal("revoked though the logout failed")
	}
	if status, body := postLogout(t, r.url, token); status != http.StatusOK {
		t.Fatalf("the provider's resend: %d %s", status, body)
	}
	if got, err := r.gw.Revoked(t.Context(), session); err != nil || !got {
		t.Errorf("after the resend: revoked %v %v, want true", got, err)
	}
}
