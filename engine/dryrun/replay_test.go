package dryrun

import (
	"context"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/internal/testkit/policytest"
	"github.com/svc-dev/svc/wire"
)

// A replay counts as a session does, never skips for want of room, and
// ignores what the policy did not decide.
func TestReplayCounts(t *testing.T) {
	enf := policytest.Default(t)
	clock := time.Date(2026, 11, 27, 21, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	r := NewReplay(candidate(t), time.Second, now)
	ctx := context.Background()
	for range 500 {
		r.Evaluate(ctx, event(t, enf, "acme", "viewer", "invoices:read")) // newly denied
	}
	r.Evaluate(ctx, event(t, enf, "acme", "admin", "orders:delete")) // allowed by both
	r.Evaluate(ctx, engine.DecisionEvent{Evaluated: false})
	r.Skip()
	rep := r.Report()
	if rep.State != wire.DryRunFinished || rep.Revision != "candidate-1" || rep.Ended == nil || !rep.Ends.Equal(*rep.Ended) {
		t.Errorf("report state %q revision %q ended %v ends %v", rep.State, rep.Revision, rep.Ended, rep.Ends)
	}
	if rep.Decisions != 502 || rep.Evaluated != 501 || rep.Allow != 1 || rep.SimulatedDeny != 500 || rep.Skipped != 1 || rep.Errors != 0 {
		t.Errorf("counts = %+v", rep)
	}
	if len(rep.Changed) != 1 || rep.Changed[0] != (wire.Change{Change: "newly-denied", Action: "invoices:read", Tenant: "acme", Count: 500}) {
		t.Errorf("changed = %+v", rep.Changed)
	}
	if again := r.Report(); again.Ended == nil || !again.Ended.Equal(*rep.Ended) {
		t.Errorf("a second Report moved the end: %v, then %v", rep.Ended, again.Ended)
	}
}
