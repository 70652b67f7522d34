package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// DefaultRedisPrefix is the key prefix of Redis buckets when
// RedisOptions.Prefix is empty.
const DefaultRedisPrefix = "svc:ratelimit"

// DefaultRedisTimeout bounds one Allow call against Redis when
// RedisOptions.Timeout is zero: a slow Redis must never stall decisions.
const DefaultRedisTimeout = 50 * time.Millisecond

// RedisOptions configure a Redis limiter. Every field is optional.
type RedisOptions struct {
	// Prefix starts every bucket key, "<Prefix>:<tenant>"; default
	// DefaultRedisPrefix. Replicas sharing budgets must use the same one.
	Prefix string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Timeout bounds each call to Redis; default DefaultRedisTimeout.
	Timeout time.Duration
}

// Redis is a Limiter whose buckets live in Redis, so that every replica
// pointed at the same Redis and prefix draws from one budget per tenant.
// It is safe for concurrent use.
//
// Buckets follow the same token-bucket rule as Memory, applied atomically
// by one Lua script per request. The current time is the caller's clock,
// passed to the script, rather than the Redis TIME command: a script that
// reads TIME and then writes is refused by Redis before 5.0 (it could not
// be replicated as a script), and the caller's clock can be injected in
// tests. Clocks of replicas may differ slightly; a bucket's timestamp never
// moves backwards, so a replica whose clock lags refills nothing until its
// clock catches up, and a clock running ahead refills early by at most its
// lead, once, rather than on every request.
//
// Unlike Memory, a change of a tenant's budget keeps the tokens left
// (capped at the new budget) instead of starting a full bucket: while a
// new configuration rolls out, replicas disagree on the budget and would
// otherwise refill each other's bucket on every request.
type Redis struct {
	client  redis.UniversalClient
	budgets Budgets
	prefix  string
	now     func() time.Time
	timeout time.Duration
}

var _ Limiter = (*Redis)(nil)

// redisSocketTimeout is the shortest dial, read and write timeout of a
// client from RedisClientOptions. Calls with a context deadline end at
// that deadline when it comes first.
const redisSocketTimeout = 250 * time.Millisecond

// RedisClientOptions returns go-redis options for a limiter's client to
// the Redis at addr (host:port), whose calls are bounded by timeout (the
// limiter's RedisOptions.Timeout; zero means DefaultRedisTimeout). They
// make the client honor the context deadline of each call, which is what
// bounds Allow to its timeout (by default go-redis waits its own 5 s read
// timeout); dial, read and write timeouts are 250 ms, or timeout when it
// is longer, so that a call without a deadline is bounded too and one with
// a longer deadline is not cut short. Retries are off: the script takes a
// token, so retrying one whose reply was lost could count a request twice.
func RedisClientOptions(addr string, timeout time.Duration) *redis.Options {
	socket := max(redisSocketTimeout, timeout)
	return &redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           socket,
		ReadTimeout:           socket,
		WriteTimeout:          socket,
		DialerRetries:         1,
		MaxRetries:            -1,
		// A plain standalone Redis: no cluster maintenance push messages.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// NewRedis returns a limiter keeping its buckets in Redis through client.
// The caller owns client and closes it. The per-call timeout only bounds
// a client that honors context deadlines (see RedisClientOptions).
func NewRedis(client redis.UniversalClient, budgets Budgets, opts RedisOptions) *Redis {
	r := &Redis{client: client, budgets: budgets, prefix: opts.Prefix, now: opts.Now, timeout: opts.Timeout}
	if r.prefix == "" {
		r.prefix = DefaultRedisPrefix
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.timeout <= 0 {
		r.timeout = DefaultRedisTimeout
	}
	return r
}

// takeScript refills the bucket KEYS[1] (hash {tokens, ts_ms}) of a budget
// of ARGV[1] requests a minute up to the time ARGV[2] (Unix ms), takes one
// token when there is one, and keeps the bucket until it would be full
// again (plus a second), after which a missing bucket means a full one.
// It returns {1, 0} when allowed, else {0, ms until one token}.
var takeScript = redis.NewScript(`
local rpm = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local rate = rpm / 60000
local v = redis.call('HMGET', KEYS[1], 'tokens', 'ts_ms')
local tokens, ts = tonumber(v[1]), tonumber(v[2])
if tokens == nil or ts == nil then
  tokens, ts = rpm, now
else
  if tokens > rpm then tokens = rpm end
  if now > ts then
    tokens = math.min(rpm, tokens + (now - ts) * rate)
    ts = now
  end
end
local allowed, wait = 0, 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = math.ceil((1 - tokens) / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts_ms', ts)
redis.call('PEXPIRE', KEYS[1], math.ceil((rpm - tokens) / rate) + 1000)
return {allowed, wait}
`)

// Allow implements Limiter. When Redis cannot be reached within the
// timeout it returns an error and no decision.
func (r *Redis) Allow(ctx context.Context, tenant string) (bool, time.Duration, error) {
	rpm := r.budgets(tenant)
	if rpm <= 0 {
		return true, 0, nil
	}
	now := r.now().UnixMilli()
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	// Tenant ids are case-sensitive arbitrary strings; Redis keys are
	// binary-safe, so the id goes into the key unchanged.
	res, err := takeScript.Run(ctx, r.client, []string{r.prefix + ":" + tenant}, rpm, now).Int64Slice()
	if err != nil {
		return false, 0, fmt.Errorf("ratelimit: redis: %w", err)
	}
	if len(res) != 2 {
		return false, 0, errors.New("ratelimit: redis: malformed script reply")
	}
	if res[0] == 1 {
		return true, 0, nil
	}
	return false, time.Duration(res[1]) * time.Millisecond, nil
}
