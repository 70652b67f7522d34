package samlgw

import (
	"testing"
	"time"
)

// TestWorkBudget: validations may take a slot's burst of work at once;
// past it no new one starts until the credit grows back at paceShare of
// wall time per slot, so a flood of costly documents gets at most that
// share of the CPU, while short sign-ons in bursts are never refused.
func TestWorkBudget(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	b := newWorkBudget(2, clock)
	// Bursts of real responses (0.5 ms each) pass: 2 slots x 250 ms.
	for i := 0; i < 999; i++ {
		if !b.available() {
			t.Fatalf("refused after %d short validations", i)
		}
		b.spend(500 * time.Microsecond)
	}
	// Costly documents spend the rest; then none starts.
	for b.available() {
		b.spend(100 * time.Millisecond)
	}
	// The credit grows back at 2 x 0.25 per second: 100 ms of debt at
	// most is repaid within 200 ms.
	now = now.Add(250 * time.Millisecond)
	if !b.available() {
		t.Fatalf("still refused 250 ms after the debt, credit %v", b.credit)
	}
	// Over a long flood the work admitted is the share, not more.
	var work time.Duration
	start := now
	for i := 0; i < 10_000; i++ {
		now = now.Add(10 * time.Millisecond)
		if b.available() {
			b.spend(100 * time.Millisecond)
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
}
