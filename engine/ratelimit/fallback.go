package ratelimit

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// FallbackMode says how a Fallback limits requests while its shared
// limiter (Redis) cannot be reached.
type FallbackMode string

const (
	// FallbackLocal limits each tenant in memory at its budget divided by
	// the number of replicas, so that the fleet together keeps about one
	// budget per tenant until Redis answers again. The default.
	FallbackLocal FallbackMode = "local"
	// FallbackAllow lets requests pass uncounted: a Redis outage lifts
	// every tenant's limit.
	FallbackAllow FallbackMode = "allow"
	// FallbackDeny refuses every request of a tenant with a budget.
	FallbackDeny FallbackMode = "deny"
)

// FallbackModes lists the valid modes, the default first.
var FallbackModes = []FallbackMode{FallbackLocal, FallbackAllow, FallbackDeny}

// ParseFallbackMode returns the mode named s ("" is FallbackLocal).
func ParseFallbackMode(s string) (FallbackMode, error) {
	if s == "" {
		return FallbackLocal, nil
	}
	for _, m := range FallbackModes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown fallback mode %q (want local, allow or deny)", s)
}

// FallbackError is returned by Fallback.Allow when the shared limiter
// failed and the request was decided by the fallback mode: unlike other
// Limiter errors, the ok and retryAfter results beside it are the
// decision to apply.
type FallbackError struct {
	Mode FallbackMode
	Err  error
}

func (e *FallbackError) Error() string {
	return fmt.Sprintf("ratelimit: shared limiter unavailable, %s fallback: %v", e.Mode, e.Err)
}

func (e *FallbackError) Unwrap() error { return e.Err }

// FallbackStatus is a snapshot of a Fallback for status endpoints.
type FallbackStatus struct {
	// Mode is the configured fallback mode.
	Mode FallbackMode `json:"redis_fallback"`
	// Active is true while the shared limiter is unreachable and Mode
	// decides; Since is when that began (the first failed call).
	Active bool       `json:"fallback_active"`
	Since  *time.Time `json:"fallback_since,omitempty"`
	// Replicas divides each budget in local mode.
	Replicas int `json:"replicas"`
	// Fallbacks counts the requests decided by the fallback mode since
	// the process started.
	Fallbacks int64 `json:"fallback_decisions"`
}

// Fallback wraps a shared Limiter (Redis): while it answers, Fallback
// passes its decisions on; when a call fails, the request is decided by
// the fallback mode, and the next call tries the shared limiter again, so
// Fallback returns to it as soon as Redis answers. It is safe for
// concurrent use.
//
// In local mode the in-memory buckets are kept between outages rather
// than refilled when Redis comes back: a Redis that flaps must not hand
// out a fresh local budget on every failure.
type Fallback struct {
	shared   Limiter
	budgets  Budgets
	mode     FallbackMode
	replicas int
	local    *Memory
	now      func() time.Time

	// since is when the current outage began (Unix ns), 0 while the
	// shared limiter answers: one atomic load on the healthy path.
	since     atomic.Int64
	fallbacks atomic.Int64
}

var _ Limiter = (*Fallback)(nil)

// NewFallback wraps shared. budgets are the fleet-wide budgets; in local
// mode each tenant gets budgets(tenant)/replicas (at least 1) in memory.
// replicas below 1 count as 1; now may be nil (time.Now).
func NewFallback(shared Limiter, budgets Budgets, mode FallbackMode, replicas int, now func() time.Time) *Fallback {
	if now == nil {
		now = time.Now
	}
	if replicas < 1 {
		replicas = 1
	}
	if mode == "" {
		mode = FallbackLocal
	}
	f := &Fallback{shared: shared, budgets: budgets, mode: mode, replicas: replicas, now: now}
	f.local = NewMemory(func(tenant string) int { return ShareOf(budgets(tenant), replicas) }, now)
	return f
}

// ShareOf is one replica's share of a budget of rpm requests a minute
// among replicas: rpm/replicas rounded down, but at least 1, since 0
// means unlimited. rpm of 0 or less (unlimited) stays as it is.
func ShareOf(rpm, replicas int) int {
	if rpm <= 0 || replicas <= 1 {
		return rpm
	}
	return max(1, rpm/replicas)
}

// Allow implements Limiter. When the shared limiter fails, the decision
// of the fallback mode comes with a *FallbackError.
func (f *Fallback) Allow(ctx context.Context, tenant string) (bool, time.Duration, error) {
	// An unlimited tenant asks nothing of Redis, so its requests say
	// nothing about whether Redis answers: they must not end an outage.
	if f.budgets(tenant) <= 0 {
		return true, 0, nil
	}
	ok, wait, err := f.shared.Allow(ctx, tenant)
	if err == nil {
		if f.since.Load() != 0 {
			f.since.Store(0)
		}
		return ok, wait, nil
	}
	f.since.CompareAndSwap(0, f.now().UnixNano())
	f.fallbacks.Add(1)
	fe := &FallbackError{Mode: f.mode, Err: err}
	switch f.mode {
	case FallbackAllow:
		return true, 0, fe
	case FallbackDeny:
		// A second is the Retry-After: Redis may well be back by then.
		return false, time.Second, fe
	default:
		ok, wait, _ := f.local.Allow(ctx, tenant)
		return ok, wait, fe
	}
}

// Status returns the fallback's state.
func (f *Fallback) Status() FallbackStatus {
	s := FallbackStatus{Mode: f.mode, Replicas: f.replicas, Fallbacks: f.fallbacks.Load()}
	if ns := f.since.Load(); ns != 0 {
		t := time.Unix(0, ns)
		s.Active, s.Since = true, &t
	}
	return s
}
