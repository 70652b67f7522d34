package telemetry

import (
	"context"
	"time"

	"github.com/svc-dev/svc/engine/audit"
)

// DecisionFeed keeps recent decisions, in the shape of their audit
// records, in a bounded ring buffer and streams them to subscribers. Only
// decisions made while somebody watches are kept: publishing costs a lock
// and a copy, which an unwatched decision should not pay.
type DecisionFeed struct {
	f *feed[audit.Record, audit.Record]
}

// NewDecisionFeed returns a DecisionFeed keeping the last size decisions
// (DefaultFeedSize when size ≤ 0).
func NewDecisionFeed(size int) *DecisionFeed {
	return &DecisionFeed{f: newFeed(size, func(r *audit.Record) time.Time { return r.Time })}
}

// Publish adds a decision.
func (df *DecisionFeed) Publish(r audit.Record) { df.f.publish(r) }

// Watched reports whether the feed has a live subscriber; it is one
// atomic load.
func (df *DecisionFeed) Watched() bool { return df.f.live.Load() > 0 }

// Watch streams the buffered decisions made at or after since, then live
// ones, each only when filter (nil means all) accepts it, until ctx ends
// or Close is called. filter runs while the feed is locked.
func (df *DecisionFeed) Watch(ctx context.Context, filter func(audit.Record) bool, since time.Time) *Subscription[audit.Record] {
	return df.f.watch(ctx, filter, since)
}

// Close ends every subscription.
func (df *DecisionFeed) Close() { df.f.close() }

// Stats returns the feed's counters.
func (df *DecisionFeed) Stats() FeedStats { return df.f.stats() }
