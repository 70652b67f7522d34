//go:build race && vtprotobuf

package sidecar

// raceEnabled: the race detector changes allocation counts, which the
// allocation tests (built with -tags vtprotobuf) then skip.
const raceEnabled = true
