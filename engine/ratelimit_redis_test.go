package engine_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/idptest"
	"github.com/svc-dev/svc/engine/ratelimit/redistest"
	"github.com/svc-dev/svc/engine/reason"
)

func TestRateLimitSharedThroughRedis(t *testing.T) {
	p := idptest.New(t)
	cfg := prodConfig(p.JWKSURL())
	cfg.RateLimit.PerTenant = map[string]int{"acme": 3}
	cfg.RateLimit.RedisAddr = redistest.Start(t)
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
