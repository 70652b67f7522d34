// Package ratelimit enforces per-tenant request budgets, keyed on the
// verified tenant_id claim, expressed in requests per minute.
//
// Each tenant has a token bucket holding at most one minute of budget and
// refilled continuously at rpm/60 tokens a second: a tenant may burst up to
// its whole per-minute budget, and sustains rpm requests a minute.
package ratelimit

import (
	"context"
	"hash/maphash"
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
// The buckets live in one open-addressed table, a tenant's name, its
// budget and its tokens in one 64-byte slot: a check hashes the name once
// and, with many tenants, touches one cache line (two when it probes
// past a neighbour), not a map's slot, the budgets' table and a bucket
// allocated somewhere else.
type Memory struct {
	budgets Budgets
	now     func() time.Time
	seed    maphash.Seed

	mu        sync.Mutex
	slots     []slot // a power of two of them; hash 0 marks an empty one
	used      int
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

// minSlots is the smallest table.
const minSlots = 16

// slot is a tenant's bucket in the table: 64 bytes, one cache line.
type slot struct {
	hash   uint64 // of tenant, never 0 in a used slot
	tenant string
	tokens float64
	last   time.Duration // since Memory.epoch
	rpm    int
	perSec float64 // rpm/60, the refill a second
	_      [8]byte
}

var _ Limiter = (*Memory)(nil)

// NewMemory returns an in-memory limiter. now may be nil (time.Now).
func NewMemory(budgets Budgets, now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{budgets: budgets, now: now, seed: maphash.MakeSeed(), slots: make([]slot, minSlots)}
}

// Allow implements Limiter.
func (m *Memory) Allow(_ context.Context, tenant string) (bool, time.Duration, error) {
	h := maphash.String(m.seed, tenant) | 1
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Sub(m.lastSweep) >= sweepEvery {
		m.sweep(now)
	}
	b := m.find(h, tenant)
	if b.hash == 0 {
		// An unlimited tenant gets no bucket: it is asked again each time.
		rpm := m.budgets(tenant)
		if rpm <= 0 {
			return true, 0, nil
		}
		b = m.add(b, h, tenant, rpm, now)
	}
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

// find returns tenant's slot, or the empty slot where it would go.
// m.mu is held.
func (m *Memory) find(h uint64, tenant string) *slot {
	mask := uint64(len(m.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.hash == 0 || s.hash == h && s.tenant == tenant {
			return s
		}
	}
}

// add makes tenant's bucket, full, in the empty slot s (or where it goes
// in a grown table) and returns it. m.mu is held.
func (m *Memory) add(s *slot, h uint64, tenant string, rpm int, now time.Time) *slot {
	if m.used == 0 {
		m.epoch = now
	}
	if (m.used+1)*4 > len(m.slots)*3 {
		m.rehash(2*len(m.slots), true, 0)
		s = m.find(h, tenant)
	}
	*s = slot{hash: h, tenant: tenant, tokens: float64(rpm), last: now.Sub(m.epoch), rpm: rpm, perSec: float64(rpm) / 60}
	m.used++
	return s
}

// rehash moves the buckets into a table of n slots: every one when all
// is set, else those last used at since or after. m.mu is held.
func (m *Memory) rehash(n int, all bool, since time.Duration) {
	old := m.slots
	m.slots, m.used = make([]slot, n), 0
	mask := uint64(n - 1)
	for i := range old {
		o := &old[i]
		if o.hash == 0 || !all && o.last < since {
			continue
		}
		j := o.hash & mask
		for m.slots[j].hash != 0 {
			j = (j + 1) & mask
		}
		m.slots[j] = *o
		m.used++
	}
}

// sweep drops the buckets idle for idleAfter or more, shrinking the table
// when few are left. m.mu is held.
func (m *Memory) sweep(now time.Time) {
	m.lastSweep = now
	at := now.Sub(m.epoch)
	live := 0
	for i := range m.slots {
		if s := &m.slots[i]; s.hash != 0 && at-s.last < idleAfter {
			live++
		}
	}
	if live == m.used {
		return
	}
	n := len(m.slots)
	for n > minSlots && live*8 < n {
		n /= 2
	}
	m.rehash(n, false, at-idleAfter+1)
}

// Len returns the number of tenants whose buckets are held in memory.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}
