package dryrun

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit/policytest"
	"github.com/svc-dev/svc/policies"
)

type sink struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (s *sink) Log(r audit.Record) { s.mu.Lock(); s.recs = append(s.recs, r); s.mu.Unlock() }

// candidate is the default policy with viewers limited to listing orders:
// it denies the reads the default policy allows them.
func candidate(t testing.TB) *policy.Set {
	t.Helper()
	src, err := fs.ReadFile(policies.Default, "authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	mod := strings.Replace(string(src), `"viewer": {"*": {"read"}}`, `"viewer": {"orders": {"list"}}`, 1)
	if mod == string(src) {
		t.Fatal("the default policy no longer has the viewer line the candidate changes")
	}
	set, err := policy.FromModules(map[string]string{"authz.rego": mod}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return set.WithRevision("candidate-1")
}

func event(t testing.TB, enforced *policy.Set, tenant, role, action string) engine.DecisionEvent {
	t.Helper()
	in := engine.Input{Action: action,
		User:     policy.User{ID: "u-" + role, Role: role, Roles: []string{role}, TenantID: tenant, Claims: map[string]any{}},
		Resource: policy.Resource{Type: strings.Split(action, ":")[0], Tenant: tenant},
		Tenant:   policy.Tenant{ID: tenant, Plan: "team"}}
	res, err := enforced.Decide(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return engine.DecisionEvent{Evaluated: true, Input: in, PolicyAllow: res.Allow, Record: audit.Record{
		DecisionID: policy.NewDecisionID(), Tenant: tenant, UserID: in.User.ID, Action: action,
		Allow: res.Allow, Reason: "policy-allow", PolicyRevision: "enforced-1", DenyReasons: res.DenyReasons}}
}

func TestSessionCountsAndAudits(t *testing.T) {
	enf := policytest.Default(t)
	s := &sink{}
	m := NewManager(Deps{Audit: s, EvalTimeout: testEvalTimeout})
	if m.Active() {
		t.Fatal("Active() with no session")
	}
	sess, err := m.Start(candidate(t), Options{Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Active() {
		t.Fatal("Active() false while a session runs")
	}
	for range 3 {
		m.Observe(event(t, enf, "acme", "viewer", "orders:read"))   // newly denied
		m.Observe(event(t, enf, "acme", "viewer", "orders:delete")) // denied by both
		m.Observe(event(t, enf, "globex", "editor", "orders:read")) // allowed by both
	}
	m.Observe(engine.DecisionEvent{Evaluated: false}) // a refused token: no policy decision
	m.Stop(sess.ID())
	if m.Active() {
		t.Fatal("Active() after the session stopped")
	}
	r := sess.Report()
	if r.State != "finished" || r.Decisions != 9 || r.Evaluated != 9 || r.Skipped != 0 || r.Allow != 3 || r.SimulatedDeny != 6 || r.Errors != 0 {
		t.Fatalf("report = %+v", r)
	}
	want := []Change{{Change: "newly-denied", Action: "orders:read", Tenant: "acme", Count: 3}}
	if len(r.Changed) != 1 || r.Changed[0] != want[0] {
		t.Errorf("changed = %+v, want %+v", r.Changed, want)
	}
	if len(r.TopDenyReason) != 2 || r.TopDenyReason[0].Count != 3 || !strings.Contains(r.TopDenyReason[0].Reason+r.TopDenyReason[1].Reason, "viewer cannot orders:read") {
		t.Errorf("top deny reasons = %+v", r.TopDenyReason)
	}
	if len(s.recs) != 9 {
		t.Fatalf("%d audit records, want one per evaluation (9)", len(s.recs))
	}
	for _, rec := range s.recs {
		if !rec.Simulated || rec.PolicyRevision != "candidate-1" || rec.Source != audit.SourceDryRun || rec.DecisionID == "" {
			t.Errorf("audit record = %+v, want simulated with the candidate's revision", rec)
		}
	}
	// Observed after the end: not counted.
	m.Observe(event(t, enf, "acme", "viewer", "orders:read"))
	if again := sess.Report(); again.Decisions != 9 {
		t.Errorf("a stopped session counted a decision: %+v", again)
	}
}

func TestSessionSkipsWhatItCannotKeepUpWith(t *testing.T) {
	enf := policytest.Default(t)
	m := NewManager(Deps{EvalTimeout: testEvalTimeout})
	sess, err := m.Start(candidate(t), Options{Duration: time.Minute, QueueSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	ev := event(t, enf, "acme", "viewer", "orders:read")
	const n = 2000
	for range n {
		m.Observe(ev)
	}
	m.Stop(sess.ID())
	r := sess.Report()
	if r.Decisions != n || r.Evaluated+r.Skipped != n || r.Skipped == 0 || r.Evaluated == 0 {
		t.Errorf("report = %+v, want evaluated + skipped = %d with some of each", r, n)
	}
}

func TestSessionEndsByItself(t *testing.T) {
	m := NewManager(Deps{EvalTimeout: testEvalTimeout})
	sess, err := m.Start(candidate(t), Options{Duration: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sess.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the session did not end after its duration")
	}
	if m.Active() {
		t.Error("Active() after the session's end")
	}
	if got, ok := m.Get(sess.ID()); !ok || got.Report().State != "finished" {
		t.Error("the finished session's report is gone")
	}
}

func TestStartRefuses(t *testing.T) {
	m := NewManager(Deps{EvalTimeout: testEvalTimeout})
	defer m.Close()
	for _, o := range []Options{{Duration: 0}, {Duration: 25 * time.Hour}, {Duration: time.Minute, QueueSize: -1}, {Duration: time.Minute, QueueSize: MaxQueueSize + 1}} {
		if _, err := m.Start(candidate(t), o); err == nil {
			t.Errorf("Start(%+v) accepted", o)
		}
	}
	for range MaxSessions {
		if _, err := m.Start(candidate(t), Options{Duration: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Start(candidate(t), Options{Duration: time.Minute}); err == nil {
		t.Errorf("session %d accepted", MaxSessions+1)
	}
	m.Close()
	if m.Active() {
		t.Error("Active() after Close")
	}
}

// testEvalTimeout bounds the evaluations of the tests that are not about
// the bound: generous, as the race detector on a loaded machine can take
// the default 50 ms for one evaluation.
const testEvalTimeout = time.Minute
