package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
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
