//go:build race

package policy_test

// raceEnabled is true under -race, which changes allocation counts.
const raceEnabled = true
