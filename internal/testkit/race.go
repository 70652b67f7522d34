package testkit

import "testing"

// SkipUnderRace skips t when the race detector is on: it changes
// allocation counts, which allocation tests assert.
func SkipUnderRace(t testing.TB) {
	t.Helper()
	if RaceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
}
