package oidcgw_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
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
