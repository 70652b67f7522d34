package testkit

import (
	"testing"
	"time"
)

// WaitTimeout is how long Eventually waits: far above what any condition
// of the tests takes, even on a loaded machine under the race detector.
const WaitTimeout = 30 * time.Second

// Eventually polls cond until it holds, first every millisecond and then
// less often, up to every 50 ms, and fails t, naming what, when it still
// does not after WaitTimeout. Tests wait on the
// condition they mean instead of sleeping for a guessed time.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, WaitTimeout, what, cond)
}

// EventuallyWithin is Eventually with a deadline of d.
func EventuallyWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(pause)
	}
}
