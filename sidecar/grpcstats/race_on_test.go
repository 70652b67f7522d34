//go:build race

package grpcstats

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = true
