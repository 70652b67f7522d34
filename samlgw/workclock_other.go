//go:build !linux

package samlgw

import "time"

// startWork measures a validation's work as its wall time where the
// thread's CPU clock is not at hand: time spent waiting on the replay
// store is then charged too, which only makes the ACS yield sooner.
func startWork() func() time.Duration {
	wall := time.Now()
	return func() time.Duration { return time.Since(wall) }
}
