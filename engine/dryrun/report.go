package dryrun

import (
	"sort"

	"github.com/svc-dev/svc/wire"
)

// Report is the state of a session; its JSON form is what the sidecar
// answers and core policy dry-run --output json prints (package wire).
type Report = wire.DryRunReport

// ReasonCount is a deny reason and how often the candidate gave it.
type ReasonCount = wire.ReasonCount

// Change counts the decisions of one action and tenant that the candidate
// would decide differently from enforcement.
type Change = wire.Change

// Report returns the session's counts so far; final once Done is closed.
func (s *Session) Report() Report {
	r := Report{
		ID: s.id, Revision: s.revision, State: wire.DryRunRunning, Started: s.started, Ends: s.ends,
		Decisions: s.decisions.Load(), Allow: s.allow.Load(), SimulatedDeny: s.deny.Load(),
		Errors: s.errs.Load(), Timeouts: s.timeouts.Load(), Skipped: s.skipped.Load(),
		TopDenyReason: []ReasonCount{}, Changed: []Change{},
	}
	r.Evaluated = r.Allow + r.SimulatedDeny + r.Errors
	select {
	case <-s.done:
		r.State = wire.DryRunFinished
		e := s.ended
		r.Ended = &e
	default:
	}
	s.mu.Lock()
	for reason, n := range s.denyReasons {
		r.TopDenyReason = append(r.TopDenyReason, ReasonCount{Reason: reason, Count: n})
	}
	for c, n := range s.changes {
		kind := "newly-allowed"
		if c.newlyDenied {
			kind = "newly-denied"
		}
		r.Changed = append(r.Changed, Change{Change: kind, Action: c.action, Tenant: c.tenant, Count: n})
	}
	s.mu.Unlock()
	sort.Slice(r.TopDenyReason, func(i, j int) bool {
		a, b := r.TopDenyReason[i], r.TopDenyReason[j]
		return a.Count > b.Count || (a.Count == b.Count && a.Reason < b.Reason)
	})
	if len(r.TopDenyReason) > topReasons {
		r.TopDenyReason = r.TopDenyReason[:topReasons]
	}
	sort.Slice(r.Changed, func(i, j int) bool {
		a, b := r.Changed[i], r.Changed[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		if a.Change != b.Change {
			return a.Change < b.Change
		}
		if a.Action != b.Action {
			return a.Action < b.Action
		}
		return a.Tenant < b.Tenant
	})
	return r
}
