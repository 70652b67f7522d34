package oidcgw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
			wantRefused(t, "callback", res, body, reason.OIDCStateUnknown)
			op.wantNoTokenCalls(t)
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
		wantRefused(t, "callback at the other gateway", res, body, reason.OIDCStateUnknown)
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
	wantRefused(t, "the callback replayed at the first replica", res, body, reason.OIDCStateUnknown)
	if n := op.tokenCalls.Load(); n != 1 {
		t.Fatalf("%d posts to the token endpoint, want the sign-in's alone", n)
	}
}

// floodLogins is the size of a flood of logins: seconds of requests from
// one client, twice what the gateway once kept in memory.
func floodLogins() int {
	if testkit.RaceEnabled {
		// The race detector makes each login some fifty times slower;
		// the count matters less than that none is kept.
		return 20_000
	}
	return 200_000
}

// recordingStore is a memory store that records the keys written to it.
type recordingStore struct {
	*oidcgw.MemoryStore
	mu      sync.Mutex
	written []string
}

func (s *recordingStore) wrote(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written = append(s.written, key)
}

// keys returns the keys written so far.
func (s *recordingStore) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.written)
}

func (s *recordingStore) Put(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	s.wrote(key)
	return s.MemoryStore.Put(ctx, key, value, ttl)
}

func (s *recordingStore) Lock(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	s.wrote(key)
	return s.MemoryStore.Lock(ctx, key, ttl)
}

// answeredStates counts the keys of answered states among keys.
func answeredStates(keys []string) int {
	n := 0
	for _, k := range keys {
		if strings.HasPrefix(k, "svc:oidc:state-used:") {
			n++
		}
	}
	return n
}

// flood sends n anonymous logins through h; each must start a sign-in.
func flood(t *testing.T, h http.Handler, n int) {
	t.Helper()
	refused := 0
	for range n {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/auth/oidc/login?return_to=%2Fx", nil))
		if w.Code != http.StatusFound {
			refused++
		}
	}
	if refused > 0 {
		t.Errorf("%d logins of the flood refused, want none", refused)
	}
}

// TestLoginFloodKeepsNothing: anyone can start a sign-in, and a pending
// sign-in travels sealed in the browser, so a flood of logins writes
// nothing to the store (nor to Redis, where revocations live too). A
// sign-in started before the flood still completes, the provider's
// back-channel logout is still recorded, and a later sign-in works.
func TestLoginFloodKeepsNothing(t *testing.T) {
	store := &recordingStore{MemoryStore: oidcgw.NewMemoryStore(nil)}
	r := newRigWith(t, newTestOP(t, "app"), httptest.NewServer, nil, oidcgw.Deps{Store: store})
	b := browser(t)
	cb := r.toCallback(t, b, "/before")
	flood(t, r.gw.Handler(), floodLogins())
	if k := store.keys(); len(k) != 0 {
		t.Fatalf("the flood wrote %d keys to the store, want none", len(k))
	}
	if res, body := get(t, b, cb); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/before" {
		t.Fatalf("the sign-in started before the flood: %d %s, want 303 to /before", res.StatusCode, body)
	}
	if n := answeredStates(store.keys()); n != 1 {
		t.Fatalf("the sign-in recorded %d answered states, want its own", n)
	}

	events := map[string]any{oidcgw.BackchannelLogoutEvent: map[string]any{}}
	res, err := http.PostForm(r.url+"/auth/oidc/backchannel-logout", url.Values{"logout_token": {r.op.sign(t, "app", "ann", map[string]any{"sid": "sid-1", "events": events})}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("back-channel logout after the flood: %d, want 200", res.StatusCode)
	}
	if revoked, err := r.gw.Revoked(context.Background(), map[string]any{"idp": "default", "idp_sid": "sid-1", "sub": "ann"}); err != nil || !revoked {
		t.Fatalf("the session the logout names: revoked %v %v", revoked, err)
	}
	b = browser(t)
	if res, body := get(t, b, r.toCallback(t, b, "/")); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in after the flood: %d %s, want 303", res.StatusCode, body)
	}
}

// TestLoginFloodLeavesRedisAlone: with Redis, the flood adds no key; the
// sign-in started before it completes and records its answered state.
func TestLoginFloodLeavesRedisAlone(t *testing.T) {
	addr := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	r := newRig(t, func(c *config.Config) { c.RateLimit.RedisAddr = addr })
	dbsize := func() int64 {
		t.Helper()
		n, err := c.DBSize(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	b := browser(t)
	cb := r.toCallback(t, b, "/before")
	before := dbsize() // the shared state key
	flood(t, r.gw.Handler(), floodLogins())
	if n := dbsize(); n != before {
		t.Fatalf("Redis holds %d keys after the flood, %d before", n, before)
	}
	if res, body := get(t, b, cb); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/before" {
		t.Fatalf("the sign-in started before the flood: %d %s, want 303 to /before", res.StatusCode, body)
	}
	keys, err := c.Keys(t.Context(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n := answeredStates(keys); n != 1 {
		t.Fatalf("Redis holds %d answered states after the sign-in, want its own: %v", n, keys)
	}
}
