package sidecar

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/loopback"
	"github.com/svc-dev/svc/engine/ratelimit"
	"github.com/svc-dev/svc/internal/redismem"
	"github.com/svc-dev/svc/wire"
)

// redisCheckEvery is how often the Redis of rate_limit.redis_addr is
// asked about its memory bound.
const redisCheckEvery = time.Minute

// redisCheck watches whether the Redis of rate_limit.redis_addr may
// evict keys when full (package redismem): logouts, the SAML replay
// store, used sign-in states and rate-limit budgets are kept there, and
// one evicted is a guarantee lost without an error. It is asked at the
// start and every redisCheckEvery; GET /v1/status shows the answer, and
// an evicting Redis makes the status degraded (redis-evicts-keys). A
// warning is logged when the answer changes.
type redisCheck struct {
	addr   string
	client *redis.Client
	log    *slog.Logger
	now    func() time.Time

	mu sync.Mutex
	st wire.RedisStatus
}

// newRedisCheck makes the check of cfg's Redis; nil without one.
func newRedisCheck(cfg config.RateLimit, log *slog.Logger) (*redisCheck, error) {
	if cfg.RedisAddr == "" {
		return nil, nil
	}
	client, err := ratelimit.RedisClient(cfg)
	if err != nil {
		return nil, err
	}
	if host, _, _ := net.SplitHostPort(cfg.RedisAddr); cfg.RedisPasswordFile != "" && !cfg.RedisTLS && !loopback.Host(host) {
		log.Warn("the Redis password crosses the network in clear: set rate_limit.redis_tls, unless a mesh encrypts the connection",
			"redis_addr", cfg.RedisAddr)
	}
	return &redisCheck{
		addr:   cfg.RedisAddr,
		client: client,
		log:    log,
		now:    time.Now,
		st:     wire.RedisStatus{Addr: cfg.RedisAddr},
	}, nil
}

// run checks now and every redisCheckEvery until ctx ends, then closes
// the client.
func (r *redisCheck) run(ctx context.Context) {
	defer r.client.Close()
	t := time.NewTicker(redisCheckEvery)
	defer t.Stop()
	for {
		r.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check asks the server once.
func (r *redisCheck) check(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := redismem.Read(ctx, r.client)
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		// An unreachable Redis is shown where its users show it (the
		// rate limiter's fallback, the gateways' errors); the last
		// answer stands.
		r.st.LastError = err.Error()
		return
	}
	was := r.st
	r.st = wire.RedisStatus{Addr: r.addr, MaxMemoryPolicy: m.Policy, MaxMemory: m.MaxMemory, Evicts: m.Evicts(), CheckedAt: &now}
	switch {
	case r.st.Evicts && (!was.Evicts || was.MaxMemoryPolicy != m.Policy):
		r.log.Warn("Redis may evict keys when full: logouts, revoked sessions, the SAML replay store and rate-limit budgets kept there can be lost; set maxmemory-policy noeviction",
			"redis_addr", r.addr, "maxmemory_policy", m.Policy, "maxmemory", m.MaxMemory)
	case !r.st.Evicts && was.Evicts:
		r.log.Info("Redis no longer evicts keys", "redis_addr", r.addr, "maxmemory_policy", m.Policy, "maxmemory", m.MaxMemory)
	}
}

// status is the last answer.
func (r *redisCheck) status() wire.RedisStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// observe reports, as svc.redis.evicts, 1 while the Redis may evict keys
// and 0 while it may not, once it has answered; nothing without Redis.
func (r *redisCheck) observe(m metric.Meter) error {
	if r == nil {
		return nil
	}
	_, err := m.Int64ObservableGauge("svc.redis.evicts",
		metric.WithDescription("1 while the Redis of rate_limit.redis_addr may evict keys when full (a maxmemory and a policy other than noeviction), 0 while it may not."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			st := r.status()
			switch {
			case st.CheckedAt == nil:
			case st.Evicts:
				o.Observe(1)
			default:
				o.Observe(0)
			}
			return nil
		}))
	return err
}
