//go:build linux

package samlgw

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// startWork starts measuring the CPU time of the calling goroutine's work
// and returns the function that ends the measure, on the same goroutine.
// The goroutine is locked to its thread meanwhile, so that the thread's
// CPU time (getrusage RUSAGE_THREAD) is the validation's: time spent
// waiting on the replay store or the request key (Redis) is not work and
// is not charged to the ACS budget. Without the thread's clock it falls
// back to wall time.
func startWork() func() time.Duration {
	runtime.LockOSThread()
	wall := time.Now()
	t0, ok := threadCPU()
	return func() time.Duration {
		t1, ok1 := threadCPU()
		runtime.UnlockOSThread()
		if !ok || !ok1 || t1 < t0 {
			return time.Since(wall)
		}
		return t1 - t0
	}
}

func threadCPU() (time.Duration, bool) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
