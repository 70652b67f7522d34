package main

import (
	"context"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestStopWatch: a stop signal cancels the serving context, and release
// reports it whether or not the watcher had read it yet; without one,
// release reports none.
func TestStopWatch(t *testing.T) {
	t.Run("no signal", func(t *testing.T) {
		w := watchStopSignals()
		if w.release() {
			t.Fatal("release reported a signal that never came")
		}
	})
	t.Run("signal read by the watcher", func(t *testing.T) {
		w := watchStopSignals()
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.ctx.Done():
		case <-time.After(time.Minute):
			t.Fatal("SIGINT did not cancel the serving context")
		}
		if !w.release() {
			t.Fatal("release did not report the SIGINT")
		}
	})
	t.Run("signal relayed, not yet read", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		w := &stopWatch{ctx: ctx, cancel: cancel, ch: make(chan os.Signal, 1), quit: make(chan struct{}), done: make(chan struct{})}
		w.ch <- syscall.SIGTERM // relayed; the watcher has not run
		close(w.done)
		if !w.release() || ctx.Err() == nil {
			t.Fatal("release lost a relayed signal that the watcher had not read")
		}
	})
	t.Run("signal just before release", func(t *testing.T) {
		// Sent to this thread, the signal is taken by the runtime before
		// Tgkill returns, so it came before release: release must find
		// it, read or not (missing it would leave the default action to
		// end the test binary).
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for range 50 {
			w := watchStopSignals()
			if err := syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if !w.release() {
				t.Fatal("a SIGTERM sent before release was lost")
			}
		}
	})
}
