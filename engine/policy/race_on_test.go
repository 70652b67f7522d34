//go:build race

package policy_test

// raceEnabled: the race detector changes allocation counts, which the
// allocation tests then skip.
const raceEnabled = true
