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
	seen, ok := Await(d, cond)
	if ok {
		return
	}
	if seen != "" {
		t.Fatalf("timed out after %v waiting for %s; last seen: %s", d, what, seen)
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
}

// Await is Poll for a caller that reports a timeout itself rather than
// failing the test (a fault-matrix row, a helper returning an error): it
// polls cond as Poll does, and returns the state cond last saw with
// whether it held within d.
func Await(d time.Duration, cond func() (ok bool, seen string)) (seen string, ok bool) {
	deadline := time.Now().Add(d)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		ok, seen := cond()
		if ok {
			return seen, true
		}
		if time.Now().After(deadline) {
			return seen, false
		}
		time.Sleep(pause)
	}
}
