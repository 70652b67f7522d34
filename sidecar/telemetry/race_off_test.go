//go:build !race

package telemetry

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = false
