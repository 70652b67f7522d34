package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// stopWatch turns SIGTERM and SIGINT into the cancellation of a context
// while an image serves. Before the process image is replaced for a
// restart, release hands the signals back to their default action, so
// that one arriving during the exec ends the process (its drain is
// already over) instead of being caught by an image that is going away
// and lost with it.
type stopWatch struct {
	ctx    context.Context
	cancel context.CancelFunc
	ch     chan os.Signal
	quit   chan struct{}
	done   chan struct{}
}

func watchStopSignals() *stopWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &stopWatch{ctx: ctx, cancel: cancel, ch: make(chan os.Signal, 1), quit: make(chan struct{}), done: make(chan struct{})}
	signal.Notify(w.ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		defer close(w.done)
		select {
		case <-w.ch:
			cancel()
		case <-w.quit:
		}
	}()
	return w
}

// release stops relaying the signals (from now on they take their
// default action) and reports whether one arrived before: relayed and
// acted on, or relayed and not yet read.
func (w *stopWatch) release() (signalled bool) {
	signal.Stop(w.ch) // no signal reaches w.ch after this returns
	close(w.quit)
	<-w.done
	select {
	case <-w.ch:
		w.cancel()
	default:
	}
	return w.ctx.Err() != nil
}
