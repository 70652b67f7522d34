package dryrun

import (
	"context"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/policy"
)

// Replay evaluates a candidate on recorded decisions (core policy
// replay), one at a time in the caller's goroutine, and counts them as a
// Session counts live ones: its Report is a dry-run report. Nothing is
// skipped for want of room; Skip counts the decisions that cannot be
// evaluated. A Replay is not safe for concurrent use.
type Replay struct {
	s *Session
}

// NewReplay returns a Replay of candidate. Each evaluation is cut off
// after evalTimeout (DefaultEvalTimeout when 0) and counted in timeouts;
// now is the clock (time.Now when nil).
func NewReplay(candidate *policy.Set, evalTimeout time.Duration, now func() time.Time) *Replay {
	if now == nil {
		now = time.Now
	}
	if evalTimeout <= 0 {
		evalTimeout = DefaultEvalTimeout
	}
	start := now()
	return &Replay{s: &Session{
		id:          policy.NewDecisionID(),
		revision:    candidate.Revision(),
		candidate:   candidate,
		started:     start,
		ends:        start,
		done:        make(chan struct{}),
		denyReasons: map[string]uint64{},
		changes:     map[change]uint64{},
		now:         now,
		timeout:     evalTimeout,
	}}
}

// Evaluate evaluates the candidate on ev's input and compares it with
// ev's outcome, as a session does for a live decision. A decision the
// policy did not make (ev.Evaluated false: the credential or the budget
// decided) is not counted, as a session is never offered one.
func (r *Replay) Evaluate(ctx context.Context, ev engine.DecisionEvent) {
	if !ev.Evaluated {
		return
	}
	r.s.decisions.Add(1)
	r.s.evaluate(ctx, ev)
}

// Skip counts a policy decision that cannot be evaluated, such as a
// record without its input.
func (r *Replay) Skip() {
	r.s.decisions.Add(1)
	r.s.skipped.Add(1)
}

// Report returns the final counts: the replay is finished, and
// Evaluate and Skip must not be called any more.
func (r *Replay) Report() Report {
	select {
	case <-r.s.done:
	default:
		r.s.ended = r.s.now()
		r.s.ends = r.s.ended
		close(r.s.done)
	}
	return r.s.Report()
}
