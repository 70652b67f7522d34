package engine_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/idptest"
	"github.com/svc-dev/svc/engine/ratelimit/redistest"
	"github.com/svc-dev/svc/engine/reason"
)

func TestRateLimitSharedThroughRedis(t *testing.T) {
	p := idptest.New(t)
	cfg := prodConfig(p.JWKSURL())
	cfg.RateLimit.PerTenant = map[string]int{"acme": 3}
	cfg.RateLimit.RedisAddr = redistest.Start(t)
	// Generous: this tests sharing, not latency. Under the race detector
	// on a loaded machine the first call (dial, script load) can take far
	// longer than the 50 ms default, and would then pass uncounted.
	cfg.RateLimit.RedisTimeout = config.Duration{Duration: 10 * time.Second}
	replicas := []*engine.Engine{newEngine(t, cfg, engine.Deps{}), newEngine(t, cfg, engine.Deps{})}
	tok := p.Token(t, claimsFor("acme", "viewer"))
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		res, err := replicas[i%2].Authorize(ctx, tok, engine.Input{Action: "orders:read"})
		if err != nil || !res.Allowed() {
			t.Fatalf("request %d within the shared budget denied: %+v err=%v", i, res.Decision, err)
		}
	}
	for i, e := range replicas {
		res, err := e.Authorize(ctx, tok, engine.Input{Action: "orders:read"})
		if err != nil || res.Allowed() || res.Decision.Reason != reason.RateLimited || res.Decision.RetryAfter <= 0 {
			t.Fatalf("replica %d past the shared budget: %+v err=%v, want rate-limited with retry-after", i, res.Decision, err)
		}
	}
}

func TestRateLimitRedisUnreachablePassesUncounted(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	p := idptest.New(t)
	cfg := prodConfig(p.JWKSURL())
	cfg.RateLimit.PerTenant = map[string]int{"acme": 1}
	cfg.RateLimit.RedisAddr = addr
	var logs bytes.Buffer
	e := newEngine(t, cfg, engine.Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	tok := p.Token(t, claimsFor("acme", "viewer"))
	for i := 0; i < 3; i++ {
		start := time.Now()
		res, err := e.Authorize(context.Background(), tok, engine.Input{Action: "orders:read"})
		if err != nil || !res.Allowed() {
			t.Fatalf("request %d with Redis down: %+v err=%v, want allowed uncounted", i, res.Decision, err)
		}
		if elapsed := time.Since(start); elapsed >= time.Second {
			t.Fatalf("request %d took %v with Redis down", i, elapsed)
		}
	}
	if !strings.Contains(logs.String(), "rate limiter unavailable") {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
}

// TestRateLimitRedisTimeoutConfigured checks that rate_limit.redis_timeout
// bounds a call: against a Redis that accepts connections and never
// answers, a request waits the configured timeout (not the 50 ms default),
// then passes uncounted.
func TestRateLimitRedisTimeoutConfigured(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for {
			select {
			case c := <-conns:
				c.Close()
			default:
				return
			}
		}
	})

	const timeout = 400 * time.Millisecond
	p := idptest.New(t)
	cfg := prodConfig(p.JWKSURL())
	cfg.RateLimit.PerTenant = map[string]int{"acme": 1}
	cfg.RateLimit.RedisAddr = l.Addr().String()
	cfg.RateLimit.RedisTimeout = config.Duration{Duration: timeout}
	e := newEngine(t, cfg, engine.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tok := p.Token(t, claimsFor("acme", "viewer"))
	for i := 0; i < 2; i++ {
		start := time.Now()
		res, err := e.Authorize(context.Background(), tok, engine.Input{Action: "orders:read"})
		elapsed := time.Since(start)
		if err != nil || !res.Allowed() {
			t.Fatalf("request %d with a silent Redis: %+v err=%v, want allowed uncounted", i, res.Decision, err)
		}
		// A lower bound only: a loaded machine makes calls slower, never faster.
		if elapsed < timeout {
			t.Fatalf("request %d returned after %v, want it to wait rate_limit.redis_timeout (%v)", i, elapsed, timeout)
		}
	}
}
