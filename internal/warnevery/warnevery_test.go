package warnevery

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	var g Gate
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {time.Second, false}, {29 * time.Second, false}, {30 * time.Second, true}, {31 * time.Second, false}, {61 * time.Second, true}} {
		if got := g.Allow(t0.Add(tc.at), 30*time.Second); got != tc.want {
			t.Errorf("Allow at +%s = %v, want %v", tc.at, got, tc.want)
		}
	}
}

// TestGateOnceAmongMany: of many callers at the same moment, one warns.
func TestGateOnceAmongMany(t *testing.T) {
	var g Gate
	var n atomic.Int32
	var wg sync.WaitGroup
	now := time.Unix(1000, 0)
	for range 64 {
		wg.Go(func() {
			if g.Allow(now, time.Minute) {
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if n.Load() != 1 {
		t.Errorf("%d callers let through, want 1", n.Load())
	}
}
