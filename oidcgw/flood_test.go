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
)

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
