package engine

import (
	"context"
	"time"

	"github.com/svc-dev/svc/engine/audit"
)

// DecisionObserver sees decisions as they are made, for live streams and
// dry-run sessions. Observing is asked on every decision and must cost no
// more than an atomic load; ObserveDecision is called only while Observing
// reports true, on the request path, so it must not block.
type DecisionObserver interface {
	// Observing reports whether anybody is watching decisions now.
	Observing() bool
	// ObserveDecision receives one decision. ev and what it refers to
	// must not be modified.
	ObserveDecision(ctx context.Context, ev DecisionEvent)
}

// DecisionEvent is one decision as an observer sees it.
type DecisionEvent struct {
	// Record is the decision's audit record (Simulated set in dry-run
	// policy mode).
	Record audit.Record
	// Input is the policy input as evaluated; meaningful only when
	// Evaluated is true.
	Input Input
	// Evaluated is true when the policy was evaluated: the token was
	// accepted and the tenant's budget was not spent.
	Evaluated bool
	// PolicyAllow is the active policy's own outcome, before the policy
	// mode applied: in dry-run mode a denying policy still lets the
	// request through (Record.Allow is then the would-be outcome too).
	PolicyAllow bool
	// Latency is the time the decision took.
	Latency time.Duration
}
