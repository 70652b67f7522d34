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
	Poll(t, d, what, func() (bool, string) { return cond(), "" })
}

// Poll is EventuallyWithin for a condition that says what it found: cond
// reports whether it holds and, when it does not, the state it saw (a
// status, the last error, the output so far), which the failure after d
// prints beside what was awaited.
func Poll(t testing.TB, d time.Duration, what string, cond func() (ok bool, seen string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if seen != "" {
				t.Fatalf("timed out after %v waiting for %s; last seen: %s", d, what, seen)
			}
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(pause)
	}
}
