package engine_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/internal/testkit/metrictest"
	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/internal/testkit/tcpproxy"
	"github.com/svc-dev/svc/reason"
)

// Two replicas share one budget through Redis: a plain one, and one as
// managed services run it (TLS from a private CA, an ACL user with a
// password, as rate_limit.redis_tls, redis_tls_ca_file, redis_username
// and redis_password_file say).
func TestRateLimitSharedThroughRedis(t *testing.T) {
	ca := testkit.NewCA(t, "redis-ca")
	server := ca.Server(t)
	for _, tc := range []struct {
		name   string
		secure func(*config.RateLimit)
	}{
		{"plain", func(r *config.RateLimit) { r.RedisAddr = redistest.Start(t) }},
		{"TLS and ACL user", func(r *config.RateLimit) {
			r.RedisAddr = redistest.StartWith(t, redistest.Options{User: "svc", Password: "pw-1", TLS: &server, Roots: ca.Pool()})
			r.RedisTLS, r.RedisTLSCAFile = true, testkit.TempFile(t, "ca.pem", ca.PEM)
			r.RedisUsername, r.RedisPasswordFile = "svc", testkit.TempFile(t, "pw", []byte("pw-1\n"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := idptest.New(t)
			cfg := prodConfig(p.JWKSURL())
			cfg.RateLimit.PerTenant = map[string]int{"acme": 3}
			tc.secure(&cfg.RateLimit)
			// Generous: this tests sharing, not latency. Under the race
			// detector on a loaded machine the first call (dial, script
			// load) can take far longer than the 50 ms default, and
			// would then pass uncounted.
			cfg.RateLimit.RedisTimeout = config.Duration{Duration: 10 * time.Second}
			cfg.RateLimit.RedisFallback = "deny"
			if err := engine.Check(cfg); err != nil {
				t.Fatal(err)
			}
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
				if st := e.Status(); st.RateLimit == nil || st.RateLimit.Active || st.RateLimit.Fallbacks != 0 {
					t.Fatalf("replica %d decided by the fallback: %+v", i, st.RateLimit)
				}
			}
		})
	}
}

// A password file that cannot be read stops the engine (and `core
// config validate`, which runs Check) with the setting named.
func TestRateLimitRedisPasswordFileMissing(t *testing.T) {
	p := idptest.New(t)
	cfg := prodConfig(p.JWKSURL())
	cfg.RateLimit.RedisAddr = "127.0.0.1:6379"
	cfg.RateLimit.RedisPasswordFile = "/nonexistent/redis-password"
	_, errNew := engine.New(cfg, engine.Deps{})
	for name, err := range map[string]error{"Check": engine.Check(cfg), "New": errNew} {
		var se *engine.SettingError
		if !errors.As(err, &se) || se.Key != "rate_limit.redis_password_file" {
			t.Errorf("%s: %v, want an error of rate_limit.redis_password_file", name, err)
		}
	}
}

func TestRateLimitRedisUnreachablePassesUncounted(t *testing.T) {
	addr := testkit.DeadAddr(t)
	p := idptest.New(t)
	cfg := prodConfig(p.JWKSURL())
	cfg.RateLimit.PerTenant = map[string]int{"acme": 1}
	cfg.RateLimit.RedisAddr = addr
	cfg.RateLimit.RedisFallback = "allow"
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
	const timeout = 400 * time.Millisecond
	p := idptest.New(t)
	cfg := prodConfig(p.JWKSURL())
	cfg.RateLimit.PerTenant = map[string]int{"acme": 1}
	cfg.RateLimit.RedisAddr = testkit.BlackHole(t)
	cfg.RateLimit.RedisTimeout = config.Duration{Duration: timeout}
	cfg.RateLimit.RedisFallback = "allow"
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

// TestRateLimitRedisFallback cuts two replicas off their Redis: under the
// default local fallback the tenant keeps its budget across them (each
// replica its share), status says which mode is in force and since when,
// and once Redis answers the shared budget decides again. Under deny every
// request of a budgeted tenant is refused.
func TestRateLimitRedisFallback(t *testing.T) {
	redisAddr := redistest.Start(t)
	p := idptest.New(t)
	tok := p.Token(t, claimsFor("acme", "viewer"))
	ctx := context.Background()
	authorize := func(e *engine.Engine) engine.Result {
		t.Helper()
		res, err := e.Authorize(ctx, tok, engine.Input{Action: "orders:read"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	fleet := func(mode string) ([]*engine.Engine, []*tcpproxy.Proxy, *bytes.Buffer) {
		cfg := prodConfig(p.JWKSURL())
		cfg.RateLimit.PerTenant = map[string]int{"acme": 10}
		cfg.RateLimit.RedisTimeout = config.Duration{Duration: 5 * time.Second}
		cfg.RateLimit.RedisFallback = mode
		cfg.RateLimit.Replicas = 2
		var logs bytes.Buffer
		var es []*engine.Engine
		var ps []*tcpproxy.Proxy
		for i := 0; i < 2; i++ {
			px := tcpproxy.Start(t, redisAddr)
			c := cfg
			c.RateLimit.RedisAddr = px.Addr
			deps := engine.Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			if i == 0 && mode == "" {
				deps.MeterProvider = mp
			}
			es = append(es, newEngine(t, c, deps))
			ps = append(ps, px)
		}
		return es, ps, &logs
	}

	t.Run("local", func(t *testing.T) {
		es, ps, logs := fleet("")
		if st := es[0].Status().RateLimit; st == nil || st.Mode != "local" || st.Active || st.Replicas != 2 {
			t.Fatalf("status with Redis up: %+v", st)
		}
		for _, px := range ps {
			px.Cut()
		}
		allowed := 0
		for i := 0; i < 40; i++ {
			res := authorize(es[i%2])
			if res.Allowed() {
				allowed++
			} else if res.Decision.Reason != reason.RateLimited {
				t.Fatalf("request %d: %+v, want allowed or rate-limited", i, res.Decision)
			}
		}
		// 10 a minute across two replicas: 5 each, and a minute's refill
		// of a request at most during the test.
		if allowed < 10 || allowed > 12 {
			t.Fatalf("Redis down: %d of 40 allowed, want the tenant's budget 10 across the fleet", allowed)
		}
		st := es[0].Status().RateLimit
		if st == nil || !st.Active || st.Since == nil || st.Mode != "local" {
			t.Fatalf("status with Redis down: %+v", st)
		}
		if got := fallbackMetrics(t, reader); got["active/local"] != 1 || got["decisions/local"] < 20 {
			t.Fatalf("metrics with Redis down: %v, want active/local 1 and the fallback's decisions", got)
		}
		if !strings.Contains(logs.String(), "limited by the fallback mode") {
			t.Fatalf("no warning logged:\n%s", logs.String())
		}
		for _, px := range ps {
			px.Heal()
		}
		authorize(es[0])
		if st := es[0].Status().RateLimit; st == nil || st.Active {
			t.Fatalf("status with Redis back: %+v", st)
		}
		if got := fallbackMetrics(t, reader); got["active/local"] != 0 {
			t.Fatalf("metrics with Redis back: %v, want active/local 0", got)
		}
	})

	t.Run("deny", func(t *testing.T) {
		es, ps, _ := fleet("deny")
		if res := authorize(es[0]); !res.Allowed() {
			t.Fatalf("Redis up: %+v", res.Decision)
		}
		ps[0].Cut()
		res := authorize(es[0])
		if res.Allowed() || res.Decision.Reason != reason.RateLimited || res.Decision.RetryAfter <= 0 {
			t.Fatalf("deny, Redis down: %+v, want rate-limited with retry-after", res.Decision)
		}
		if res := authorize(es[1]); !res.Allowed() {
			t.Fatalf("the replica still connected: %+v", res.Decision)
		}
	})
}

// fallbackMetrics collects svc.rate_limit.fallback.* as "active/<mode>"
// and "decisions/<mode>".
func fallbackMetrics(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	rm := metrictest.Collect(t, reader)
	got := map[string]int64{}
	for _, name := range []string{"active", "decisions"} {
		for mode, n := range metrictest.Values(rm, "svc.rate_limit.fallback."+name, "mode") {
			got[name+"/"+mode] = n
		}
	}
	return got
}
