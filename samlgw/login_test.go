package samlgw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/samlgw"
)

func withStore(s samlgw.Store) option {
	return func(_ *config.Config, d *samlgw.Deps) { d.Store = s }
}

// Anonymous GET /login requests leave no state behind: a flood of them
// neither fills the replay store nor stops a real sign-on, and replay
// protection still holds afterwards.
func TestLoginFloodDoesNotStopSignOn(t *testing.T) {
	const limit = 500
	store := samlgw.NewMemoryStore(nil)
	samlgw.SetMemoryStoreLimit(store, limit)
	f := newFixture(t, withStore(store))

	h := f.gw.Handler()
	for i := 0; i < 3*limit; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/auth/saml/login", nil))
		if rec.Code != http.StatusFound {
			t.Fatalf("login %d of the flood: %d %s", i, rec.Code, rec.Body)
		}
	}
	if n := samlgw.MemoryStoreLen(store); n != 0 {
		t.Errorf("the flood left %d entries in the store, want 0", n)
	}

	r := f.answering(t)
	doc := signed(t, r)
	if a := f.post(t, doc, true); a.status != http.StatusOK {
		t.Fatalf("sign-on after the flood: %d %q %s, want 200", a.status, a.code, a.message)
	}
	if a := f.post(t, doc, true); a.status != http.StatusUnauthorized || a.code != string(reason.SAMLReplayed) {
		t.Fatalf("replay after the flood: %d %q, want 401 %q", a.status, a.code, reason.SAMLReplayed)
	}
	f.answeredOnce(t, r)
}

// With Redis, replicas share the request key: a login started at one
// gateway is answered at another, once; a flood of logins writes nothing
// but that key.
func TestLoginAcrossReplicasWithRedis(t *testing.T) {
	addr := redistest.Start(t)
	withRedis := func(c *config.Config, _ *samlgw.Deps) {
		c.RateLimit.RedisAddr = addr
		// Generous: a first call (dial, handshake) under the race detector
		// on a loaded machine can take longer than the default bound.
		c.RateLimit.RedisTimeout = config.Duration{Duration: 10 * time.Second}
	}
	a, b := newFixture(t, withRedis), newFixture(t, withRedis)
	b.jar = a.jar // one browser, behind a proxy that spreads it over both

	for i := 0; i < 200; i++ {
		if _, _, status := a.login(t, "/"); status != http.StatusFound {
			t.Fatalf("login %d: %d", i, status)
		}
	}
	rc := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rc.Close() })
	keys, err := rc.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 {
		t.Errorf("after 200 logins Redis holds %v, want the request key alone", keys)
	}

	r := a.answering(t)
	if ans := b.post(t, signed(t, r), true); ans.status != http.StatusOK {
		t.Fatalf("answer at B to a login started at A: %d %q %s", ans.status, ans.code, ans.message)
	}
	a.answeredOnce(t, r)
}
