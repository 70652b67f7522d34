package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/reason"
)

// observer records the decisions it is shown while watching is true.
type observer struct {
	mu       sync.Mutex
	watching bool
	events   []engine.DecisionEvent
}

func (o *observer) Observing() bool { o.mu.Lock(); defer o.mu.Unlock(); return o.watching }
func (o *observer) ObserveDecision(_ context.Context, ev engine.DecisionEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, ev)
}

func TestPolicyModeDryRunNeverDeniesOnPolicy(t *testing.T) {
	p := idptest.New(t)
	sink := &auditSink{}
	cfg := prodConfig(p.JWKSURL())
	cfg.Policy.Mode = config.PolicyModeDryRun
	e := newEngine(t, cfg, engine.Deps{Audit: sink})
	if e.PolicyMode() != "dry-run" || e.Status().PolicyMode != "dry-run" {
		t.Fatalf("PolicyMode() = %q", e.PolicyMode())
	}
	ctx := context.Background()
	viewer := p.Token(t, claimsFor("acme", "viewer"))

	tests := []struct {
		name      string
		token     string
		action    string
		allowed   bool
		code      reason.Code
		auditAll  bool
		auditCode string
		simulated bool
	}{
		{"policy deny goes through", viewer, "orders:delete", true, reason.PolicyDryRun, false, "policy-deny", true},
		{"policy allow is simulated too", viewer, "orders:read", true, reason.PolicyAllow, true, "policy-allow", true},
		{"an invalid token is still refused", "garbage", "orders:read", false, reason.TokenMalformed, false, "token-malformed", false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.Authorize(ctx, tt.token, engine.Input{Action: tt.action})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed() != tt.allowed || res.Decision.Reason != tt.code {
				t.Errorf("Authorize = allowed %v reason %s, want %v %s", res.Allowed(), res.Decision.Reason, tt.allowed, tt.code)
			}
			rec := sink.Records()[i]
			if rec.Allow != tt.auditAll || rec.Reason != tt.auditCode || rec.Simulated != tt.simulated {
				t.Errorf("audit record = allow %v reason %s simulated %v, want %v %s %v",
					rec.Allow, rec.Reason, rec.Simulated, tt.auditAll, tt.auditCode, tt.simulated)
			}
		})
	}
	if got := sink.Records()[0].DenyReasons; len(got) != 1 || got[0] != "role-forbidden: viewer cannot orders:delete" {
		t.Errorf("simulated denial's reasons = %v", got)
	}
}

func TestObserverSeesDecisionsOnlyWhileObserving(t *testing.T) {
	p := idptest.New(t)
	o := &observer{}
	e := newEngine(t, prodConfig(p.JWKSURL()), engine.Deps{Observer: o})
	ctx := engine.WithSource(context.Background(), "grpc")
	viewer := p.Token(t, claimsFor("acme", "viewer"))

	if _, err := e.Authorize(ctx, viewer, engine.Input{Action: "orders:read"}); err != nil {
		t.Fatal(err)
	}
	if len(o.events) != 0 {
		t.Fatalf("observer shown %d decisions while not observing", len(o.events))
	}
	o.watching = true
	for _, act := range []string{"orders:read", "orders:delete"} {
		if _, err := e.Authorize(ctx, viewer, engine.Input{Action: act}); err != nil {
			t.Fatal(err)
		}
	}
	e.Authorize(ctx, "garbage", engine.Input{Action: "orders:read"})
	if len(o.events) != 3 {
		t.Fatalf("observer shown %d decisions, want 3", len(o.events))
	}
	read, del, bad := o.events[0], o.events[1], o.events[2]
	if !read.Evaluated || !read.PolicyAllow || !read.Record.Allow || read.Input.User.ID != "user-1" || read.Record.Source != "grpc" {
		t.Errorf("allowed read event = %+v", read)
	}
	if !del.Evaluated || del.PolicyAllow || del.Record.Allow || del.Input.Action != "orders:delete" || len(del.Record.DenyReasons) != 1 {
		t.Errorf("denied delete event = %+v", del)
	}
	if bad.Evaluated || bad.Record.Reason != "token-malformed" || bad.Record.DecisionID == "" {
		t.Errorf("invalid token event = %+v", bad)
	}
}
