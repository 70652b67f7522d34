package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestMemoryBudgets(t *testing.T) {
	budgets := map[string]int{"AcMe": 60, "small": 2, "free": 0}
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	m := NewMemory(func(id string) int { return budgets[id] }, c.now)
	ctx := context.Background()

	t.Run("burst up to the per-minute budget then refuse", func(t *testing.T) {
		for i := 0; i < 60; i++ {
			if ok, _, _ := m.Allow(ctx, "AcMe"); !ok {
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
			if ok, _, _ := m.Allow(ctx, "AcMe"); !ok {
				t.Fatalf("refilled request %d refused", i)
			}
		}
		if ok, _, _ := m.Allow(ctx, "AcMe"); ok {
			t.Fatal("third request after 2s at 1 rps allowed")
		}
	})
	t.Run("tenants are independent and case-sensitive", func(t *testing.T) {
		if ok, _, _ := m.Allow(ctx, "small"); !ok {
			t.Fatal("small tenant refused")
		}
		// "acme" has no budget entry here: unlimited, unaffected by "AcMe".
		if ok, _, _ := m.Allow(ctx, "acme"); !ok {
			t.Fatal("acme refused")
		}
	})
	t.Run("zero budget is unlimited", func(t *testing.T) {
		for i := 0; i < 1000; i++ {
			if ok, _, _ := m.Allow(ctx, "free"); !ok {
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

func BenchmarkMemoryAllow(b *testing.B) {
	m := NewMemory(func(string) int { return 1 << 30 }, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m.Allow(ctx, "acme")
	}
}
