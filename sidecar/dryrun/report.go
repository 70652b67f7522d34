package dryrun

import (
	"sort"
	"time"
)

// Report is the state of a session; its JSON form is what the sidecar
// answers and core policy dry-run --output json prints.
type Report struct {
	ID       string     `json:"id"`
	Revision string     `json:"revision"`
	State    string     `json:"state"` // "running" or "finished"
	Started  time.Time  `json:"started"`
	Ends     time.Time  `json:"ends"`
	Ended    *time.Time `json:"ended,omitempty"`
	// Decisions counts the policy decisions offered to the session;
	// Evaluated + Skipped = Decisions once the session has finished.
	Decisions     uint64 `json:"decisions"`
	Evaluated     uint64 `json:"evaluated"`
	Allow         uint64 `json:"allow"`
	SimulatedDeny uint64 `json:"simulated_deny"`
	Errors        uint64 `json:"errors"`
	// Timeouts counts the evaluations cut off after
	// policy.dry_run_eval_timeout; they are among Errors.
	Timeouts      uint64        `json:"timeouts"`
	Skipped       uint64        `json:"skipped"`
	TopDenyReason []ReasonCount `json:"top_deny_reasons"`
	Changed       []Change      `json:"changed"`
}

// ReasonCount is a deny reason and how often the candidate gave it.
type ReasonCount struct {
	Reason string `json:"reason"`
	Count  uint64 `json:"count"`
}

// Change counts the decisions of one action and tenant that the candidate
// would decide differently from enforcement.
type Change struct {
	// Change is "newly-denied" (enforcement allowed, the candidate
	// denies) or "newly-allowed".
	Change string `json:"change"`
	Action string `json:"action"`
	Tenant string `json:"tenant"`
	Count  uint64 `json:"count"`
}

// Report returns the session's counts so far; final once Done is closed.
func (s *Session) Report() Report {
	r := Report{
		ID: s.id, Revision: s.revision, State: "running", Started: s.started, Ends: s.ends,
		Decisions: s.decisions.Load(), Allow: s.allow.Load(), SimulatedDeny: s.deny.Load(),
		Errors: s.errs.Load(), Timeouts: s.timeouts.Load(), Skipped: s.skipped.Load(),
		TopDenyReason: []ReasonCount{}, Changed: []Change{},
	}
	r.Evaluated = r.Allow + r.SimulatedDeny + r.Errors
	select {
	case <-s.done:
		r.State = "finished"
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
