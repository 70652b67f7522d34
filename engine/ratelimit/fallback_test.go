package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/internal/testkit/tcpproxy"
)

func TestShareOf(t *testing.T) {
	for _, c := range []struct{ rpm, replicas, want int }{
		{600, 3, 200}, {600, 1, 600}, {1000, 3, 333}, {2, 3, 1}, {0, 3, 0}, {-1, 3, -1}, {5, 0, 5},
	} {
		if got := ShareOf(c.rpm, c.replicas); got != c.want {
			t.Errorf("ShareOf(%d, %d) = %d, want %d", c.rpm, c.replicas, got, c.want)
		}
	}
}

func TestParseFallbackMode(t *testing.T) {
	for in, want := range map[string]FallbackMode{"": FallbackLocal, "local": FallbackLocal, "allow": FallbackAllow, "deny": FallbackDeny} {
		if got, err := ParseFallbackMode(in); err != nil || got != want {
			t.Errorf("ParseFallbackMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseFallbackMode("open"); err == nil {
		t.Error(`ParseFallbackMode("open") accepted`)
	}
}

// TestFallbackAgainstRedis runs a fleet of three limiters on one real
// redis-server, each through a TCP proxy the test can cut: the fleet
// shares one budget while Redis answers, keeps about one budget between
// them (each its share, in memory) while it does not, and returns to the
// shared budget when Redis answers again.
func TestFallbackAgainstRedis(t *testing.T) {
	addr := redistest.Start(t)
	const (
		replicas = 3
		rpm      = 60
		timeout  = 2 * time.Second
	)
	budgets := func(string) int { return rpm }
	// A frozen clock: no refill during the test, so counts are exact.
	t0 := time.Unix(1_700_000_000, 0)
	now := func() time.Time { return t0 }
	type replica struct {
		proxy *tcpproxy.Proxy
		fb    *Fallback
	}
	fleet := func(prefix string, mode FallbackMode) []replica {
		var rs []replica
		for i := 0; i < replicas; i++ {
			p := tcpproxy.Start(t, addr)
			c := redis.NewClient(RedisClientOptions(p.Addr, timeout))
			t.Cleanup(func() { c.Close() })
			shared := NewRedis(c, budgets, RedisOptions{Prefix: prefix, Now: now, Timeout: timeout})
			rs = append(rs, replica{p, NewFallback(shared, budgets, mode, replicas, now)})
		}
		return rs
	}
	// take makes n requests of tenant round-robin over rs and returns how
	// many were allowed and how many came with a FallbackError.
	take := func(rs []replica, tenant string, n int) (allowed, fallbacks int) {
		ctx := context.Background()
		for i := 0; i < n; i++ {
			ok, _, err := rs[i%len(rs)].fb.Allow(ctx, tenant)
			var fe *FallbackError
			if err != nil && !errors.As(err, &fe) {
				t.Fatalf("Allow: %v, want nil or a FallbackError", err)
			}
			if fe != nil {
				fallbacks++
			}
			if ok {
				allowed++
			}
		}
		return allowed, fallbacks
	}

	t.Run("local", func(t *testing.T) {
		rs := fleet("fb-local", FallbackLocal)
		// Shared: the fleet together gets the one budget.
		if got, fb := take(rs, "acme", 2*rpm); got != rpm || fb != 0 {
			t.Fatalf("Redis up: %d allowed (%d by fallback) of %d, want exactly the budget %d", got, fb, 2*rpm, rpm)
		}
		for _, r := range rs {
			if st := r.fb.Status(); st.Active || st.Mode != FallbackLocal || st.Replicas != replicas {
				t.Fatalf("status with Redis up: %+v", st)
			}
		}
		// Redis away from every replica: each allows its share.
		for _, r := range rs {
			r.proxy.Cut()
		}
		got, fb := take(rs, "globex", 3*rpm)
		if got != rpm || fb != 3*rpm {
			t.Fatalf("Redis down: %d allowed (%d by fallback) of %d, want the fleet to keep one budget %d", got, fb, 3*rpm, rpm)
		}
		for i, r := range rs {
			st := r.fb.Status()
			if !st.Active || st.Since == nil || !st.Since.Equal(t0) || st.Fallbacks != rpm {
				t.Fatalf("replica %d status with Redis down: %+v", i, st)
			}
		}
		// Back: the shared bucket decides again (globex untouched in Redis).
		for _, r := range rs {
			r.proxy.Heal()
		}
		if got, fb := take(rs, "globex", 2*rpm); got != rpm || fb != 0 {
			t.Fatalf("Redis back: %d allowed (%d by fallback), want the shared budget %d", got, fb, rpm)
		}
		for i, r := range rs {
			if st := r.fb.Status(); st.Active || st.Since != nil {
				t.Fatalf("replica %d status with Redis back: %+v", i, st)
			}
		}
	})

	t.Run("one replica cut off", func(t *testing.T) {
		rs := fleet("fb-one", FallbackLocal)
		rs[0].proxy.Cut()
		// The cut replica allows its share; the other two share the
		// Redis budget: never more than share + budget in all.
		got, _ := take(rs, "acme", 6*rpm)
		if want := ShareOf(rpm, replicas) + rpm; got != want {
			t.Fatalf("%d allowed, want %d (one share in memory + the Redis budget)", got, want)
		}
		if !rs[0].fb.Status().Active || rs[1].fb.Status().Active {
			t.Fatalf("status: cut %+v, connected %+v", rs[0].fb.Status(), rs[1].fb.Status())
		}
	})

	t.Run("unlimited tenants do not end an outage", func(t *testing.T) {
		p := tcpproxy.Start(t, addr)
		c := redis.NewClient(RedisClientOptions(p.Addr, timeout))
		t.Cleanup(func() { c.Close() })
		mixed := func(tenant string) int {
			if tenant == "free" {
				return 0
			}
			return rpm
		}
		fb := NewFallback(NewRedis(c, mixed, RedisOptions{Prefix: "fb-mixed", Now: now, Timeout: timeout}), mixed, FallbackLocal, 1, now)
		p.Cut()
		ctx := context.Background()
		if _, _, err := fb.Allow(ctx, "acme"); err == nil {
			t.Fatal("Redis cut: no FallbackError")
		}
		if ok, _, err := fb.Allow(ctx, "free"); !ok || err != nil {
			t.Fatalf("unlimited tenant: ok=%v err=%v", ok, err)
		}
		if st := fb.Status(); !st.Active {
			t.Fatalf("an unlimited tenant's request ended the outage: %+v", st)
		}
	})

	t.Run("allow", func(t *testing.T) {
		rs := fleet("fb-allow", FallbackAllow)
		for _, r := range rs {
			r.proxy.Cut()
		}
		if got, fb := take(rs, "acme", 3*rpm); got != 3*rpm || fb != 3*rpm {
			t.Fatalf("allow mode, Redis down: %d allowed (%d by fallback) of %d, want all uncounted", got, fb, 3*rpm)
		}
	})

	t.Run("deny", func(t *testing.T) {
		rs := fleet("fb-deny", FallbackDeny)
		if got, _ := take(rs, "acme", 3); got != 3 {
			t.Fatalf("deny mode, Redis up: %d of 3 allowed", got)
		}
		for _, r := range rs {
			r.proxy.Cut()
		}
		if got, fb := take(rs, "acme", 30); got != 0 || fb != 30 {
			t.Fatalf("deny mode, Redis down: %d allowed (%d by fallback), want none", got, fb)
		}
		ok, wait, err := rs[0].fb.Allow(context.Background(), "acme")
		if ok || wait <= 0 || err == nil {
			t.Fatalf("deny: ok=%v wait=%v err=%v, want refused with a retry-after", ok, wait, err)
		}
	})
}
