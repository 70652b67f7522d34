// Package periodic runs a function on a ticker until its context ends:
// the loop of the engine's file watchers and of the decision log's
// spool syncs.
package periodic

import (
	"context"
	"time"
)

// Every calls f every d, on the calling goroutine, until ctx ends.
func Every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
