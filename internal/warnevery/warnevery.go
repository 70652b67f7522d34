// Package warnevery spaces repeated warnings: a failure met on every
// request (a limiter's Redis down, an introspection endpoint failing, a
// full decision-log spool) is logged once per interval, not once per
// request.
package warnevery

import (
	"sync/atomic"
	"time"
)

// Gate lets one warning through per interval. Its zero value lets the
// first one through. Safe for concurrent use: of the callers that arrive
// together when an interval is up, exactly one is let through.
type Gate struct {
	last atomic.Int64 // Unix nanoseconds of the latest warning let through; 0 for none
}

// Allow reports whether a warning at now may be logged: none was, or the
// latest was every or longer before now.
func (g *Gate) Allow(now time.Time, every time.Duration) bool {
	n := now.UnixNano()
	last := g.last.Load()
	return (last == 0 || n-last >= int64(every)) && g.last.CompareAndSwap(last, n)
}
