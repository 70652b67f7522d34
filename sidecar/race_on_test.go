//go:build race

package sidecar

// raceEnabled: the race detector changes allocation counts, which the
// allocation tests then skip.
const raceEnabled = true
