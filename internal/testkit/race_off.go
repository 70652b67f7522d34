//go:build !race

package testkit

// RaceEnabled tells whether the race detector is on: it changes
// allocation counts, which allocation tests then do not assert.
const RaceEnabled = false
