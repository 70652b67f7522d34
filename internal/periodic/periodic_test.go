package periodic_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/periodic"
)

func TestEveryRunsUntilCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		periodic.Every(ctx, time.Millisecond, func() {
			if n.Add(1) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	if n.Load() < 3 {
		t.Fatalf("f ran %d times before the cancel it made", n.Load())
	}
}
