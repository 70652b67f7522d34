package samlgw

import (
	"testing"
	"time"
)

// TestBucket: validations may take a lane's burst of work at once; past
// it no new one starts until the credit grows back at paceShare of wall
// time per slot, so a flood of costly documents gets at most that share
// of the CPU, while short sign-ons in bursts are never refused.
func TestBucket(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := newBucket(2*paceShare, 2*paceBurst, now)
	// Bursts of real responses (0.5 ms each) pass: 2 slots x 250 ms.
	for i := 0; i < 999; i++ {
		if !b.above(now, 0) {
			t.Fatalf("refused after %d short validations", i)
		}
		b.spend(now, 500*time.Microsecond)
	}
	// Costly documents spend the rest; then none starts.
	for b.above(now, 0) {
		b.spend(now, 100*time.Millisecond)
	}
	// The credit grows back at 2 x paceShare per second: 100 ms of debt
	// at most is repaid within 100 ms / (2 x paceShare).
	if b.above(now, 0) {
		t.Fatal("a validation may start while the budget is spent")
	}
	repaid := time.Duration(float64(100*time.Millisecond) / (2 * paceShare))
	now = now.Add(repaid + time.Millisecond)
	if !b.above(now, 0) {
		t.Fatalf("still refused %v after the debt, credit %v", repaid, b.credit)
	}
	// Over a long flood the work admitted is the share, not more.
	var work time.Duration
	start := now
	for i := 0; i < 10_000; i++ {
		now = now.Add(10 * time.Millisecond)
		if b.above(now, 0) {
			b.spend(now, 100*time.Millisecond)
			work += 100 * time.Millisecond
		}
	}
	share := work.Seconds() / now.Sub(start).Seconds() / 2
	if share > paceShare*1.05 {
		t.Errorf("a flood got %.2f of each slot's CPU, want at most %.2f", share, paceShare)
	}
	if share < paceShare*0.8 {
		t.Errorf("a flood got only %.2f of each slot's CPU; the budget refills at %.2f", share, paceShare)
	}
	if b.full(now) {
		t.Error("a bucket under a flood is full")
	}
	if !b.full(now.Add(time.Minute)) {
		t.Error("a bucket a minute after the flood is not full")
	}
}
