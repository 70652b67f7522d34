//go:build race

package envoy

// raceEnabled: the race detector changes allocation counts, which the
// allocation tests then skip.
const raceEnabled = true
