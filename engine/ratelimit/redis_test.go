package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/secretfile"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/internal/tlsfiles"
)

// TestRedis runs every Redis case against one redis-server; each case uses
// a key prefix of its own.
func TestRedis(t *testing.T) {
	addr := redistest.Start(t)
	// Generous timeout: these cases test the algorithm, not latency, on a
	// loaded machine under the race detector.
	const timeout = 5 * time.Second
	newClient := func(t *testing.T) *redis.Client {
		c := redis.NewClient(RedisClientOptions(addr, timeout))
		t.Cleanup(func() { c.Close() })
		return c
	}

	t.Run("budgets", func(t *testing.T) {
		client := newClient(t)
		testBudgets(t, func(b Budgets, now func() time.Time) Limiter {
			return NewRedis(client, b, RedisOptions{Prefix: "budgets", Now: now, Timeout: timeout})
		})
	})

	t.Run("bucket key and expiry", func(t *testing.T) {
		client := newClient(t)
		ctx := context.Background()
		for _, tenant := range []string{"AcMe", "a:b c/é", "nul\x00byte", ""} {
			l := NewRedis(client, func(string) int { return 120 }, RedisOptions{Prefix: "keys", Timeout: timeout})
			began := time.Now()
			if ok, _, err := l.Allow(ctx, tenant); !ok || err != nil {
				t.Fatalf("%q: ok=%v err=%v", tenant, ok, err)
			}
			key := "keys:" + tenant
			h, err := client.HGetAll(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			tokens, _ := strconv.ParseFloat(h["tokens"], 64)
			if len(h) != 2 || tokens < 118.9 || tokens > 119.1 || h["ts_ms"] == "" {
				t.Fatalf("%q: bucket %v, want tokens≈119 and ts_ms", tenant, h)
			}
			// One token short at 2 per second: full again in 500 ms, kept 1 s more.
			// The TTL runs from the script's call, some time between began
			// and now: on a loaded machine that time is not negligible.
			ttl, err := client.PTTL(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			const want = 1500 * time.Millisecond
			lo := want - time.Since(began) - time.Millisecond
			if ttl < lo || ttl > want {
				t.Fatalf("%q: ttl %v, want %v less the %v the calls took", tenant, ttl, want, want-lo)
			}
		}
	})

	t.Run("a budget change keeps the tokens left", func(t *testing.T) {
		client := newClient(t)
		ctx := context.Background()
		budget := 3
		c := &clock{t: time.Unix(1_700_000_000, 0)}
		l := NewRedis(client, func(string) int { return budget }, RedisOptions{Prefix: "change", Now: c.now, Timeout: timeout})
		for i := 0; i < 3; i++ {
			if ok, _, err := l.Allow(ctx, "t"); !ok || err != nil {
				t.Fatalf("request %d: ok=%v err=%v", i, ok, err)
			}
		}
		budget = 100
		if ok, _, err := l.Allow(ctx, "t"); ok || err != nil {
			t.Fatalf("after raising the budget: ok=%v err=%v, want still refused", ok, err)
		}
	})

	t.Run("two replicas share one budget exactly", func(t *testing.T) {
		const budget, calls = 500, 2000
		c := &clock{t: time.Unix(1_700_000_000, 0)}
		budgets := func(string) int { return budget }
		replicas := []*Redis{
			NewRedis(newClient(t), budgets, RedisOptions{Prefix: "shared", Now: c.now, Timeout: timeout}),
			NewRedis(newClient(t), budgets, RedisOptions{Prefix: "shared", Now: c.now, Timeout: timeout}),
		}
		var allowed, refused atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, calls)
		const workers = 40
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := replicas[w%2]
				for i := 0; i < calls/workers; i++ {
					ok, wait, err := l.Allow(context.Background(), "tenant-1")
					switch {
					case err != nil:
						errs <- err
					case ok:
						allowed.Add(1)
					case wait <= 0:
						errs <- errNoRetryAfter
					default:
						refused.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if allowed.Load() != budget || refused.Load() != calls-budget {
			t.Fatalf("allowed %d, refused %d of %d calls across two replicas, want exactly %d allowed",
				allowed.Load(), refused.Load(), calls, budget)
		}
	})
}

var errNoRetryAfter = errors.New("refused without retry-after")

// TestRedisUnavailable checks that an unreachable or silent Redis yields an
// error quickly, with the default timeout and RedisClientOptions.
func TestRedisUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr func(testing.TB) string
	}{
		{"connection refused", testkit.DeadAddr},
		{"server never answers", testkit.BlackHole},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := redis.NewClient(RedisClientOptions(tc.addr(t), 0))
			defer client.Close()
			l := NewRedis(client, func(string) int { return 10 }, RedisOptions{})
			for i := 0; i < 3; i++ {
				start := time.Now()
				ok, _, err := l.Allow(context.Background(), "acme")
				if elapsed := time.Since(start); elapsed >= time.Second {
					t.Fatalf("call %d took %v, want well under 1s", i, elapsed)
				}
				if err == nil || ok {
					t.Fatalf("call %d: ok=%v err=%v, want an error", i, ok, err)
				}
			}
		})
	}
	t.Run("unlimited tenants never reach Redis", func(t *testing.T) {
		client := redis.NewClient(RedisClientOptions(testkit.DeadAddr(t), 0))
		defer client.Close()
		l := NewRedis(client, func(string) int { return 0 }, RedisOptions{})
		if ok, _, err := l.Allow(context.Background(), "free"); !ok || err != nil {
			t.Fatalf("ok=%v err=%v, want allowed", ok, err)
		}
	})
}

func BenchmarkRedisAllow(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: redistest.Start(b)})
	defer client.Close()
	l := NewRedis(client, func(string) int { return 1 << 30 }, RedisOptions{Prefix: "bench", Timeout: time.Second})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := l.Allow(ctx, "acme"); err != nil {
			b.Fatal(err)
		}
	}
}

// A Redis as managed services run it: TLS only, its certificate from a
// private CA, an ACL user with a password. RedisClient reaches it with
// [rate_limit]'s settings, and the budgets are shared through it; a
// wrong password, or a CA that did not issue the certificate, fails the
// calls (and so the limiter's fallback decides).
func TestRedisClientTLSAndACL(t *testing.T) {
	ca := testkit.NewCA(t, "redis-ca")
	server := ca.Server(t)
	addr := redistest.StartWith(t, redistest.Options{User: "svc-sidecar", Password: "s3cret-pw", TLS: &server, Roots: ca.Pool()})
	rl := config.RateLimit{
		RedisAddr: addr, RedisTimeout: config.Duration{Duration: 5 * time.Second},
		RedisTLS: true, RedisTLSCAFile: testkit.TempFile(t, "ca.pem", ca.PEM),
		RedisUsername: "svc-sidecar", RedisPasswordFile: testkit.TempFile(t, "pw", []byte("s3cret-pw\n")),
	}
	c, err := RedisClient(rl)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	budgets := func(string) int { return 2 }
	lim := NewRedis(c, budgets, RedisOptions{Prefix: "tls", Timeout: 5 * time.Second})
	ctx := context.Background()
	for i, want := range []bool{true, true, false} {
		ok, _, err := lim.Allow(ctx, "acme")
		if err != nil || ok != want {
			t.Fatalf("check %d: allowed %v, %v; want %v", i, ok, err, want)
		}
	}

	fails := func(name string, rl config.RateLimit) {
		t.Helper()
		c, err := RedisClient(rl)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer c.Close()
		if err := c.Ping(ctx).Err(); err == nil {
			t.Errorf("%s: PING answered", name)
		}
	}
	wrong := rl
	wrong.RedisPasswordFile = testkit.TempFile(t, "wrong", []byte("guess"))
	fails("a wrong password", wrong)
	other := rl
	other.RedisTLSCAFile = testkit.TempFile(t, "other.pem", testkit.NewCA(t, "other").PEM)
	fails("a CA that did not issue the certificate", other)
	plain := rl
	plain.RedisTLS, plain.RedisTLSCAFile = false, ""
	fails("plain TCP to a TLS port", plain)
}

// The files are read when the client is made; an error names the
// setting and never holds the password.
func TestRedisClientFiles(t *testing.T) {
	base := config.RateLimit{RedisAddr: "127.0.0.1:6379", RedisTLS: true}
	for _, tc := range []struct {
		name string
		set  func(*config.RateLimit)
		key  string
	}{
		{"missing password file", func(r *config.RateLimit) { r.RedisPasswordFile = "/nonexistent/pw" }, "rate_limit.redis_password_file"},
		{"empty password file", func(r *config.RateLimit) { r.RedisPasswordFile = testkit.TempFile(t, "pw", []byte("\n")) }, "rate_limit.redis_password_file"},
		{"missing CA file", func(r *config.RateLimit) { r.RedisTLSCAFile = "/nonexistent/ca.pem" }, "rate_limit.redis_tls_ca_file"},
		{"CA file without PEM", func(r *config.RateLimit) { r.RedisTLSCAFile = testkit.TempFile(t, "ca.pem", []byte("s3cret")) }, "rate_limit.redis_tls_ca_file"},
	} {
		rl := base
		tc.set(&rl)
		_, err := RedisClient(rl)
		var se *secretfile.Error
		var fe *tlsfiles.FileError
		switch {
		case err == nil:
			t.Errorf("%s: no error", tc.name)
		case !(errors.As(err, &se) && se.Key == tc.key) && !(errors.As(err, &fe) && fe.Key == tc.key):
			t.Errorf("%s: %v, want an error of %s", tc.name, err, tc.key)
		case strings.Contains(err.Error(), "s3cret"):
			t.Errorf("%s: the error holds the file's content: %v", tc.name, err)
		}
	}
}
