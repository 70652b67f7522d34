package sharedkey_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svc-dev/svc/internal/sharedkey"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/redistest"
)

func TestStatic(t *testing.T) {
	a, err := sharedkey.NewStatic()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := sharedkey.NewStatic()
	ka, _ := a.Key(t.Context())
	kb, _ := b.Key(t.Context())
	if len(ka) != sharedkey.MinLen || bytes.Equal(ka, kb) {
		t.Fatalf("two process keys: %d bytes, equal %v", len(ka), bytes.Equal(ka, kb))
	}
}

// Replicas on one Redis agree on the key the first one created; after
// Redis lost it, they agree again on a new one within Refresh, and a
// replica that cannot reach Redis keeps the key it knows.
func TestRedisSharedByReplicas(t *testing.T) {
	addr := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	clk := testkit.NewClock(time.Now())
	a := sharedkey.NewRedis(c, "svc:test:key", clk.Now)
	b := sharedkey.NewRedis(c, "svc:test:key", clk.Now)
	key := func(s *sharedkey.Redis) []byte {
		t.Helper()
		k, err := s.Key(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	first := key(a)
	if len(first) < sharedkey.MinLen || !bytes.Equal(first, key(b)) {
		t.Fatalf("replicas hold different keys")
	}
	if err := c.Del(t.Context(), "svc:test:key").Err(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(key(a), first) {
		t.Fatal("the key changed before Refresh")
	}
	clk.Advance(sharedkey.Refresh)
	second := key(b)
	if bytes.Equal(second, first) || !bytes.Equal(key(a), second) {
		t.Fatal("after Redis lost the key the replicas do not agree on a new one")
	}

	if err := c.Set(t.Context(), "svc:test:short", "abc", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := sharedkey.NewRedis(c, "svc:test:short", clk.Now).Key(t.Context()); err == nil {
		t.Fatal("a key of 3 bytes was accepted")
	}

	down := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	d := sharedkey.NewRedis(down, "svc:test:key", clk.Now)
	known := key(d)
	_ = down.Close()
	clk.Advance(sharedkey.Refresh)
	if k, err := d.Key(t.Context()); err != nil || !bytes.Equal(k, known) {
		t.Fatalf("Redis unreachable: %v, want the key the replica knows", err)
	}
	if _, err := sharedkey.NewRedis(down, "svc:test:key", clk.Now).Key(t.Context()); err == nil {
		t.Fatal("Redis unreachable and no key known: no error")
	}
}
