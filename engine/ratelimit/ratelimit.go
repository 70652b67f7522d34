// Package ratelimit enforces per-tenant request budgets, keyed on the
// verified tenant_id claim, expressed in requests per minute.
//
// Each tenant has a token bucket holding at most one minute of budget and
// refilled continuously at rpm/60 tokens a second: a tenant may burst up to
// its whole per-minute budget, and sustains rpm requests a minute.
package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"
)

// Limiter decides whether a tenant may make one more request.
type Limiter interface {
	// Allow takes one request from tenant's budget. When the budget is
	// spent it returns false and how long until a request would be allowed.
	Allow(ctx context.Context, tenant string) (ok bool, retryAfter time.Duration, err error)
}

// Budgets tells the budget of a tenant in requests per minute; 0 or less
// means unlimited.
type Budgets func(tenant string) int

// Memory is an in-process Limiter. It is safe for concurrent use.
type Memory struct {
	budgets Budgets
	now     func() time.Time

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

// idleAfter is how long a bucket must go unused before it is dropped: a
// minute refills any bucket to its full budget, so a dropped bucket and a
// new one are the same. The map therefore holds only the tenants seen in
// the last minutes, however many tenant ids go by.
const idleAfter = time.Minute

// sweepEvery spaces the sweeps, which look at every bucket.
const sweepEvery = time.Minute

type bucket struct {
	tokens float64
	last   time.Time
	rpm    int
}

var _ Limiter = (*Memory)(nil)

// NewMemory returns an in-memory limiter. now may be nil (time.Now).
func NewMemory(budgets Budgets, now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{budgets: budgets, now: now, buckets: make(map[string]*bucket)}
}

// Allow implements Limiter.
func (m *Memory) Allow(_ context.Context, tenant string) (bool, time.Duration, error) {
	rpm := m.budgets(tenant)
	if rpm <= 0 {
		return true, 0, nil
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Sub(m.lastSweep) >= sweepEvery {
		m.sweep(now)
	}
	b, ok := m.buckets[tenant]
	if !ok || b.rpm != rpm {
		b = &bucket{tokens: float64(rpm), last: now, rpm: rpm}
		m.buckets[tenant] = b
	}
	perSec := float64(rpm) / 60
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = math.Min(float64(rpm), b.tokens+elapsed*perSec)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0, nil
	}
	wait := time.Duration((1 - b.tokens) / perSec * float64(time.Second))
	return false, wait, nil
}

// sweep drops the buckets idle for idleAfter or more. m.mu is held.
func (m *Memory) sweep(now time.Time) {
	m.lastSweep = now
	for t, b := range m.buckets {
		if now.Sub(b.last) >= idleAfter {
			delete(m.buckets, t)
		}
	}
}

// Len returns the number of tenants whose buckets are held in memory.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.buckets)
}
