//go:build race

package engine

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = true
