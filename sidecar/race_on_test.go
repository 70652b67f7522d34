//go:build race

package sidecar

// raceEnabled reports a test binary built with -race, which changes
// allocation counts.
const raceEnabled = true
