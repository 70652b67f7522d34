package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	tests := []struct {
		live uint64
		want int
	}{
		{0, MaxPercent},
		{1 << 20, MaxPercent},            // 63 MiB of room: capped
		{HeapTarget / 4, 300},            // 48 MiB of room on 16
		{HeapTarget / 2, MinPercent},     // as much room as live data
		{HeapTarget * 3 / 5, MinPercent}, // less: never below the default
		{HeapTarget, MinPercent},
		{4 * HeapTarget, MinPercent},
	}
	for _, tc := range tests {
		if got := Percent(tc.live); got != tc.want {
			t.Errorf("Percent(%d MiB) = %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}

// TestTune: with GOGC unset, Tune sets GOGC from the live heap after each
// collection, and Stop restores the default; with GOGC set it does nothing.
func TestTune(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	if tu := Tune(func(k string) (string, bool) { return "50", k == "GOGC" }); tu != nil {
		t.Fatal("Tune with GOGC in the environment returned a tuner")
	}
	if p := debug.SetGCPercent(100); p != 100 {
		t.Fatalf("GOGC = %d after Tune with GOGC in the environment, want it untouched (100)", p)
	}

	tu := Tune(func(string) (string, bool) { return "", false })
	defer tu.Stop()
	if p := gcPercent(); p != MaxPercent || tu.Percent() != MaxPercent {
		t.Fatalf("GOGC = %d (tuner says %d) on a small heap, want %d", p, tu.Percent(), MaxPercent)
	}
	// A live heap of most of HeapTarget: the next collections bring GOGC
	// down to the default.
	ballast := make([]byte, HeapTarget*3/4)
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() != MinPercent {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC = %d (tuner says %d) with a live heap of %d MiB, want %d", gcPercent(), tu.Percent(), len(ballast)>>20, MinPercent)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	runtime.KeepAlive(ballast)
	ballast = nil
	for gcPercent() != MaxPercent {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC = %d once the live heap is small again, want %d", gcPercent(), MaxPercent)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	tu.Stop()
	if p := gcPercent(); p != MinPercent {
		t.Errorf("GOGC = %d after Stop, want %d", p, MinPercent)
	}
}

// gcPercent reads GOGC without setting it, which would race with the
// tuner.
func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestHold: while holds are active GOGC is the lowest percent held and
// collections, whatever the live heap, leave it; after the last release
// the tuner sets GOGC from the live heap again.
func TestHold(t *testing.T) {
	tu := startTuner(t)
	defer tu.Stop()
	if p := gcPercent(); p != MaxPercent {
		t.Fatalf("GOGC = %d on a small heap, want %d", p, MaxPercent)
	}
	release50 := tu.Hold(50)
	if p := gcPercent(); p != 50 || tu.Percent() != 50 {
		t.Fatalf("GOGC = %d (tuner says %d) under a hold of 50", p, tu.Percent())
	}
	release25 := tu.Hold(25)
	release75 := tu.Hold(75)
	if p := gcPercent(); p != 25 {
		t.Fatalf("GOGC = %d under holds of 50, 25 and 75, want the lowest, 25", p)
	}
	// Collections on a small heap would set MaxPercent: they must not
	// while the holds last.
	for range 5 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if p := gcPercent(); p != 25 {
		t.Fatalf("GOGC = %d after collections under a hold of 25: the tuner overwrote the hold", p)
	}
	release25()
	release25() // a second call releases nothing more
	if p := gcPercent(); p != 50 {
		t.Fatalf("GOGC = %d once the hold of 25 is released, want the next lowest, 50", p)
	}
	release50()
	if p := gcPercent(); p != 75 {
		t.Fatalf("GOGC = %d with only a hold of 75 left, want 75", p)
	}
	release75()
	if p := gcPercent(); p != MaxPercent {
		t.Fatalf("GOGC = %d after the last release, want the tuner's %d at once", p, MaxPercent)
	}
	// The tuner has resumed: a large live heap brings GOGC down again.
	ballast := make([]byte, HeapTarget*3/4)
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() != MinPercent {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC = %d with a live heap of %d MiB after the holds, want %d: the tuner did not resume", gcPercent(), len(ballast)>>20, MinPercent)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	runtime.KeepAlive(ballast)
}

// TestHoldConcurrent: holds taken and released from many goroutines, with
// collections running, leave the tuner in charge once all are released.
func TestHoldConcurrent(t *testing.T) {
	tu := startTuner(t)
	defer tu.Stop()
	outer := tu.Hold(20)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 200 {
				release := tu.Hold(30 + i)
				if p := gcPercent(); p != 20 {
					t.Errorf("GOGC = %d under an outer hold of 20", p)
				}
				release()
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			runtime.GC()
		}
	})
	wg.Wait()
	if p := gcPercent(); p != 20 {
		t.Fatalf("GOGC = %d with the outer hold of 20 left", p)
	}
	outer()
	if p := gcPercent(); p != MaxPercent {
		t.Fatalf("GOGC = %d after the last release, want %d", p, MaxPercent)
	}
}

// TestHoldAfterStop: a hold released after Stop restores the default
// that Stop would have.
func TestHoldAfterStop(t *testing.T) {
	tu := startTuner(t)
	release := tu.Hold(25)
	tu.Stop()
	if p := gcPercent(); p != 25 {
		t.Fatalf("GOGC = %d after Stop under a hold of 25, want the hold kept", p)
	}
	release()
	if p := gcPercent(); p != MinPercent {
		t.Fatalf("GOGC = %d after the last release of a stopped tuner, want %d", p, MinPercent)
	}
}

// startTuner starts a tuner from GOGC=100 and restores GOGC after the
// test.
func startTuner(t *testing.T) *Tuner {
	t.Helper()
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	return Tune(func(string) (string, bool) { return "", false })
}
