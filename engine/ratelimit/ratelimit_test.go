package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestMemoryBudgets(t *testing.T) {
	testBudgets(t, func(b Budgets, now func() time.Time) Limiter { return NewMemory(b, now) })
}

// testBudgets runs the budget cases every Limiter must pass against the
// limiter newLimiter builds.
func testBudgets(t *testing.T, newLimiter func(Budgets, func() time.Time) Limiter) {
	budgets := map[string]int{"AcMe": 60, "acme": 1, "small": 2, "free": 0}
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	m := newLimiter(func(id string) int { return budgets[id] }, c.now)
	ctx := context.Background()
	allow := func(t *testing.T, tenant string) bool {
		t.Helper()
		ok, _, err := m.Allow(ctx, tenant)
		if err != nil {
			t.Fatalf("Allow(%q): %v", tenant, err)
		}
		return ok
	}

	t.Run("burst up to the per-minute budget then refuse", func(t *testing.T) {
		for i := 0; i < 60; i++ {
			if !allow(t, "AcMe") {
				t.Fatalf("request %d refused within budget", i)
			}
		}
		ok, wait, err := m.Allow(ctx, "AcMe")
		if ok || err != nil {
			t.Fatalf("61st request: ok=%v err=%v, want refused", ok, err)
		}
		if wait <= 0 || wait > time.Second {
			t.Fatalf("retry after %v, want within (0,1s] at 1 rps", wait)
		}
	})
	t.Run("refills at rpm per minute", func(t *testing.T) {
		c.t = c.t.Add(2 * time.Second)
		for i := 0; i < 2; i++ {
			if !allow(t, "AcMe") {
				t.Fatalf("refilled request %d refused", i)
			}
		}
		if allow(t, "AcMe") {
			t.Fatal("third request after 2s at 1 rps allowed")
		}
	})
	t.Run("tenants are independent and case-sensitive", func(t *testing.T) {
		// "AcMe" is spent; "acme" is another tenant with a budget of its own.
		for tenant, budget := range map[string]int{"small": 2, "acme": 1} {
			for i := 0; i < budget; i++ {
				if !allow(t, tenant) {
					t.Fatalf("%s: request %d refused within budget", tenant, i)
				}
			}
			if allow(t, tenant) {
				t.Fatalf("%s: request beyond budget %d allowed", tenant, budget)
			}
		}
		// A tenant without an entry is unlimited in this table.
		if !allow(t, "ACME") {
			t.Fatal("tenant without budget refused")
		}
	})
	t.Run("zero budget is unlimited", func(t *testing.T) {
		for i := 0; i < 1000; i++ {
			if !allow(t, "free") {
				t.Fatal("unlimited tenant refused")
			}
		}
	})
}

func TestMemoryConcurrentExactCount(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	m := NewMemory(func(string) int { return 500 }, c.now)
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if ok, _, _ := m.Allow(context.Background(), "t"); ok {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if allowed != 500 {
		t.Fatalf("allowed %d of 2000 concurrent requests, want exactly the budget 500", allowed)
	}
}

func TestMemoryForgetsIdleTenants(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	m := NewMemory(func(string) int { return 2 }, c.now)
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		m.Allow(ctx, fmt.Sprintf("tenant-%d", i))
	}
	// A tenant still using its budget keeps its bucket, spent or not.
	m.Allow(ctx, "busy")
	m.Allow(ctx, "busy")
	if n := m.Len(); n != 1001 {
		t.Fatalf("%d buckets, want 1001", n)
	}
	c.t = c.t.Add(30 * time.Second)
	m.Allow(ctx, "busy")
	c.t = c.t.Add(40 * time.Second)
	if ok, _, _ := m.Allow(ctx, "busy"); !ok {
		t.Fatal("busy tenant refused after its bucket refilled")
	}
	if n := m.Len(); n != 1 {
		t.Fatalf("%d buckets after the others idled for over a minute, want 1 (the busy tenant)", n)
	}
	// A bucket dropped while idle was full again: the budget is the same.
	for i := 0; i < 2; i++ {
		if ok, _, _ := m.Allow(ctx, "tenant-7"); !ok {
			t.Fatalf("request %d of a returning tenant refused", i)
		}
	}
	if ok, _, _ := m.Allow(ctx, "tenant-7"); ok {
		t.Fatal("a returning tenant got more than its budget")
	}
}

func BenchmarkMemoryAllow(b *testing.B) {
	m := NewMemory(func(string) int { return 1 << 30 }, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m.Allow(ctx, "acme")
	}
}

// BenchmarkMemoryTenants spreads checks over 10 and 10k tenants, each
// with a budget of its own read from a table, in a random order: the
// per-check cost should not grow with the number of tenants.
func BenchmarkMemoryTenants(b *testing.B) {
	for _, n := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("tenants=%d", n), func(b *testing.B) {
			names := make([]string, n)
			table := make(map[string]int, n)
			for i := range n {
				names[i] = fmt.Sprintf("tenant-%05d", i)
				table[names[i]] = 1<<30 + i
			}
			m := NewMemory(func(t string) int { return table[t] }, nil)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(1, 7))
			order := make([]string, 1<<16)
			for i := range order {
				order[i] = names[rng.IntN(n)]
			}
			for _, t := range names {
				m.Allow(ctx, t)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				m.Allow(ctx, order[i&(len(order)-1)])
			}
		})
	}
}

// TestMemoryKeepsBucketsWhenTheTableChanges spends a tenant's budget and
// checks that it stays spent while the table grows with other tenants
// and shrinks when they go idle.
func TestMemoryKeepsBucketsWhenTheTableChanges(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	m := NewMemory(func(string) int { return 60 }, c.now)
	ctx := context.Background()
	spend := func() {
		for {
			if ok, _, _ := m.Allow(ctx, "spent"); !ok {
				return
			}
		}
	}
	spend()
	for i := range 5000 {
		m.Allow(ctx, fmt.Sprintf("tenant-%d", i))
	}
	if ok, _, _ := m.Allow(ctx, "spent"); ok {
		t.Fatal("a spent bucket was refilled when the table grew")
	}
	c.t = c.t.Add(50 * time.Second)
	spend()
	c.t = c.t.Add(20 * time.Second) // the others idle for 70s: swept
	if ok, wait, _ := m.Allow(ctx, "spent"); !ok {
		t.Fatalf("refused after 20s at 1 rps (retry after %v)", wait)
	}
	if n := m.Len(); n != 1 {
		t.Fatalf("%d buckets after the sweep, want 1", n)
	}
	if len(m.slots) != minSlots {
		t.Fatalf("%d slots after the sweep, want %d", len(m.slots), minSlots)
	}
	for range 19 {
		if ok, _, _ := m.Allow(ctx, "spent"); !ok {
			t.Fatal("a bucket lost tokens when the table shrank")
		}
	}
	if ok, _, _ := m.Allow(ctx, "spent"); ok {
		t.Fatal("a bucket gained tokens when the table shrank")
	}
}
