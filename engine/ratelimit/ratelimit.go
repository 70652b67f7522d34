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
// means unlimited. Memory reads a tenant's budget when it makes the
// tenant's bucket, so a Budgets must give a tenant the same budget for the
// limiter's life (as the configuration of an engine does).
type Budgets func(tenant string) int

// Memory is an in-process Limiter. It is safe for concurrent use.
//
// A check is one map lookup by the tenant's name, giving the index of its
// bucket in one slice: the bucket holds the tenant's budget beside its
// tokens, so that with many tenants a check touches the map's slot and one
// bucket, not the budgets' table and a bucket allocated somewhere.
type Memory struct {
	budgets Budgets
	now     func() time.Time

	mu        sync.Mutex
	index     map[string]uint32 // tenant → its bucket in buckets
	buckets   []bucket
	free      []uint32 // buckets dropped by sweep, to be reused
	epoch     time.Time
	lastSweep time.Time
}

// idleAfter is how long a bucket must go unused before it is dropped: a
// minute refills any bucket to its full budget, so a dropped bucket and a
// new one are the same. The map therefore holds only the tenants seen in
// the last minutes, however many tenant ids go by.
const idleAfter = time.Minute

// sweepEvery spaces the sweeps, which look at every bucket.
const sweepEvery = time.Minute

// bucket is a tenant's budget and its state: 32 bytes, two to a cache
// line.
type bucket struct {
	tokens float64
	last   time.Duration // since Memory.epoch
	rpm    int
	perSec float64 // rpm/60, the refill a second
}

var _ Limiter = (*Memory)(nil)

// NewMemory returns an in-memory limiter. now may be nil (time.Now).
func NewMemory(budgets Budgets, now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{budgets: budgets, now: now, index: make(map[string]uint32)}
}

// Allow implements Limiter.
func (m *Memory) Allow(_ context.Context, tenant string) (bool, time.Duration, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Sub(m.lastSweep) >= sweepEvery {
		m.sweep(now)
	}
	i, ok := m.index[tenant]
	if !ok {
		// An unlimited tenant gets no bucket: it is asked again each time.
		rpm := m.budgets(tenant)
		if rpm <= 0 {
			return true, 0, nil
		}
		i = m.add(tenant, rpm, now)
	}
	b := &m.buckets[i]
	at := now.Sub(m.epoch)
	if elapsed := (at - b.last).Seconds(); elapsed > 0 {
		b.tokens = math.Min(float64(b.rpm), b.tokens+elapsed*b.perSec)
		b.last = at
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0, nil
	}
	wait := time.Duration((1 - b.tokens) / b.perSec * float64(time.Second))
	return false, wait, nil
}

// add makes tenant's bucket, full, in a dropped bucket's place if there
// is one, and returns its index. m.mu is held.
func (m *Memory) add(tenant string, rpm int, now time.Time) uint32 {
	if len(m.index) == 0 {
		m.epoch = now
	}
	b := bucket{tokens: float64(rpm), last: now.Sub(m.epoch), rpm: rpm, perSec: float64(rpm) / 60}
	var i uint32
	if n := len(m.free); n > 0 {
		i = m.free[n-1]
		m.free = m.free[:n-1]
		m.buckets[i] = b
	} else {
		i = uint32(len(m.buckets))
		m.buckets = append(m.buckets, b)
	}
	m.index[tenant] = i
	return i
}

// sweep drops the buckets idle for idleAfter or more. m.mu is held.
func (m *Memory) sweep(now time.Time) {
	m.lastSweep = now
	at := now.Sub(m.epoch)
	for t, i := range m.index {
		if at-m.buckets[i].last >= idleAfter {
			delete(m.index, t)
			m.free = append(m.free, i)
		}
	}
	if len(m.index) == 0 {
		m.buckets, m.free = m.buckets[:0], m.free[:0]
	}
}

// Len returns the number of tenants whose buckets are held in memory.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.index)
}
