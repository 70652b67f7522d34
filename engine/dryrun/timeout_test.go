package dryrun

import (
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit/policytest"
)

// slowRule never holds, after 25 million iterations: seconds of work for
// one evaluation unless it is cut off.
const slowRule = `package svc.authz

default allow := false

allow if {
	some i in numbers.range(1, 5000)
	some j in numbers.range(1, 5000)
	i * j == -1
}
`

// TestSlowCandidateIsCutOff: each evaluation of a candidate is bounded by
// Deps.EvalTimeout and counted in the report's timeouts (and errors), so a
// candidate that takes seconds per decision neither holds its worker nor
// delays whoever offers decisions.
func TestSlowCandidateIsCutOff(t *testing.T) {
	slow, err := policy.FromModules(map[string]string{"slow.rego": slowRule}, nil)
	if err != nil {
		t.Fatal(err)
	}
	enf := policytest.Default(t)
	s := &sink{}
	m := NewManager(Deps{Audit: s, EvalTimeout: 20 * time.Millisecond})
	sess, err := m.Start(slow.WithRevision("slow-1"), Options{Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	start := time.Now()
	for i := range n {
		roles := []string{"viewer", "editor", "admin", "billing", "auditor"}
		m.Observe(event(t, enf, "acme", roles[i], "orders:read"))
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("offering %d decisions took %s: the slow candidate delayed them", n, d)
	}
	m.Stop(sess.ID())
	elapsed := time.Since(start)
	r := sess.Report()
	if r.Evaluated != n || r.Timeouts != n || r.Errors != n || r.Allow != 0 || r.SimulatedDeny != 0 {
		t.Errorf("report = %+v, want %d evaluations, all timed out", r, n)
	}
	// Five evaluations of 20 ms, with generous room for a loaded machine;
	// uncut, one evaluation alone takes seconds.
	if elapsed > 3*time.Second {
		t.Errorf("%d evaluations took %s: not cut off at 20ms", n, elapsed)
	}
	for _, rec := range s.recs {
		if rec.Reason != "policy-error" || rec.Allow {
			t.Errorf("audit record of a cut-off evaluation = %+v, want policy-error", rec)
		}
	}

	// With a generous bound the same evaluation is not counted.
	fast := NewManager(Deps{EvalTimeout: time.Minute})
	sess, err = fast.Start(candidate(t), Options{Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	fast.Observe(event(t, enf, "acme", "viewer", "orders:read"))
	fast.Stop(sess.ID())
	if r := sess.Report(); r.Evaluated != 1 || r.Timeouts != 0 || r.Errors != 0 {
		t.Errorf("a quick candidate: report = %+v, want no timeout", r)
	}
}
