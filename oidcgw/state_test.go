package oidcgw_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/oidcgw"
	"github.com/svc-dev/svc/reason"
)

// stateCookieOf is the value of b's state cookie for r's callback.
func stateCookieOf(t *testing.T, b *http.Client, r *rig) string {
	t.Helper()
	u, _ := url.Parse(r.url + "/auth/oidc/callback")
	for _, c := range b.Jar.Cookies(u) {
		if c.Name == "svc_session_oidc" {
			return c.Value
		}
	}
	t.Fatal("no state cookie")
	return ""
}

// setStateCookieOf replaces b's state cookie for r with v.
func setStateCookieOf(t *testing.T, b *http.Client, r *rig, v string) {
	t.Helper()
	u, _ := url.Parse(r.url + "/auth/oidc/callback")
	b.Jar.SetCookies(u, []*http.Cookie{{Name: "svc_session_oidc", Value: v, Path: "/auth/oidc"}})
}

// stateEntries splits a state cookie value into its states and their
// sealed sign-ins, newest first.
func stateEntries(t *testing.T, v string) (states, sealed []string) {
	t.Helper()
	for e := range strings.SplitSeq(v, ".") {
		st, s, ok := strings.Cut(e, ":")
		if !ok || len(st) != 43 || s == "" {
			t.Fatalf("state cookie entry %q is not state:sealed", e)
		}
		states, sealed = append(states, st), append(sealed, s)
	}
	return states, sealed
}

func joinEntries(states, sealed []string) string {
	e := make([]string, len(states))
	for i := range states {
		e[i] = states[i] + ":" + sealed[i]
	}
	return strings.Join(e, ".")
}

// A pending sign-in travels sealed for its state alone: moved under
// another state, altered, sealed under another key, expired or missing,
// it is refused as oidc-state-unknown before its code goes anywhere.
func TestSealedSignInRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		// spoil changes the state cookie (or the clock) before the
		// callback of the older of two sign-ins.
		spoil func(t *testing.T, states, sealed []string, clk *testkit.Clock) string
	}{
		{"another state's sign-in", func(t *testing.T, states, sealed []string, _ *testkit.Clock) string {
			return joinEntries(states, []string{sealed[1], sealed[0]})
		}},
		{"altered", func(t *testing.T, states, sealed []string, _ *testkit.Clock) string {
			b := []byte(sealed[1])
			if i := len(b) / 2; b[i] == 'A' {
				b[i] = 'B'
			} else {
				b[i] = 'A'
			}
			return joinEntries(states, []string{sealed[0], string(b)})
		}},
		{"truncated", func(t *testing.T, states, sealed []string, _ *testkit.Clock) string {
			return joinEntries(states, []string{sealed[0], sealed[1][:len(sealed[1])-4]})
		}},
		{"missing", func(t *testing.T, states, sealed []string, _ *testkit.Clock) string {
			return states[0] + ":" + sealed[0] + "." + states[1]
		}},
		{"expired", func(t *testing.T, states, sealed []string, clk *testkit.Clock) string {
			clk.Advance(oidcgw.StateTTL)
			return joinEntries(states, sealed)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := testkit.NewClock(time.Now())
			op := newTestOP(t, "app")
			r := newRigWith(t, op, httptest.NewServer, nil, oidcgw.Deps{Now: clk.Now})
			b := browser(t)
			cb := r.toCallback(t, b, "/first")
			_ = r.toCallback(t, b, "/second")
			states, sealed := stateEntries(t, stateCookieOf(t, b, r))
			if u, _ := url.Parse(cb); len(states) != 2 || states[1] != u.Query().Get("state") {
				t.Fatalf("the state cookie lists %d states, the older not last", len(states))
			}
			setStateCookieOf(t, b, r, tt.spoil(t, states, sealed, clk))
			res, body := get(t, b, cb)
			if res.StatusCode != http.StatusUnauthorized || refusal(t, body) != reason.OIDCStateUnknown {
				t.Fatalf("callback: %d %s, want 401 %s", res.StatusCode, body, reason.OIDCStateUnknown)
			}
			if n := op.tokenCalls.Load(); n != 0 {
				t.Fatalf("the code went to the token endpoint (%d posts)", n)
			}
		})
	}
	t.Run("sealed under another gateway's key", func(t *testing.T) {
		op := newTestOP(t, "app")
		a := newRigOf(t, op, nil)
		// Another gateway without Redis: its key is its own.
		other := newRigOf(t, op, func(c *config.Config) { c.SDK.OIDC.RedirectURL = a.url + "/auth/oidc/callback" })
		b := browser(t)
		cb := a.toCallback(t, b, "/")
		res, body := get(t, b, onReplica(t, cb, other))
		if res.StatusCode != http.StatusUnauthorized || refusal(t, body) != reason.OIDCStateUnknown {
			t.Fatalf("callback at the other gateway: %d %s, want 401 %s", res.StatusCode, body, reason.OIDCStateUnknown)
		}
	})
}

// onReplica is callback URL cb sent to r's server instead.
func onReplica(t *testing.T, cb string, r *rig) string {
	t.Helper()
	u, err := url.Parse(cb)
	if err != nil {
		t.Fatal(err)
	}
	to, _ := url.Parse(r.url)
	u.Host = to.Host
	return u.String()
}

// TestSignInAcrossReplicas: replicas sharing Redis share the key that
// seals pending sign-ins and the record of answered states, so a sign-in
// started on one completes on another, and its callback, replayed at the
// first with the cookie it had, is refused.
func TestSignInAcrossReplicas(t *testing.T) {
	addr := redistest.Start(t)
	op := newTestOP(t, "app")
	a := newRigOf(t, op, func(c *config.Config) { c.RateLimit.RedisAddr = addr })
	other := newRigOf(t, op, func(c *config.Config) {
		c.RateLimit.RedisAddr = addr
		c.SDK.OIDC.RedirectURL = a.url + "/auth/oidc/callback" // one public URL in front of both
	})
	b := browser(t)
	cb := a.toCallback(t, b, "/orders")
	kept := stateCookieOf(t, b, a)
	res, body := get(t, b, onReplica(t, cb, other))
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/orders" {
		t.Fatalf("callback at the other replica: %d %s, want 303 to /orders", res.StatusCode, body)
	}
	setStateCookieOf(t, b, a, kept)
	res, body = get(t, b, cb)
	if res.StatusCode != http.StatusUnauthorized || refusal(t, body) != reason.OIDCStateUnknown {
		t.Fatalf("the callback replayed at the first replica: %d %s, want 401 %s", res.StatusCode, body, reason.OIDCStateUnknown)
	}
	if n := op.tokenCalls.Load(); n != 1 {
		t.Fatalf("%d posts to the token endpoint, want the sign-in's alone", n)
	}
}
