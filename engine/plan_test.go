package engine_test

import (
	"context"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/plan"
	"github.com/svc-dev/svc/reason"
)

// TestPlanResources: a plan is Authorize's answer for every resource at
// once — conditional on the tenant for a viewer, denied for a verb no role
// grants, denied for a refused credential and a spent budget — audited
// with its kind, and under policy.mode = dry-run every resource passes.
func TestPlanResources(t *testing.T) {
	p := idptest.New(t)
	sink := &auditSink{}
	cfg := prodConfig(p.JWKSURL())
	cfg.RateLimit.PerTenant = map[string]int{"acme": 2} // the two plans before the last
	e := newEngine(t, cfg, engine.Deps{Audit: sink})
	ctx := context.Background()
	viewer := engine.BearerToken(p.Token(t, claimsFor("acme", "viewer")))

	tests := []struct {
		name      string
		cred      engine.Credential
		action    string
		kind      plan.Kind
		code      reason.Code
		where     string
		auditPlan string
	}{
		{"viewer reads the tenant's", viewer, "orders:read", plan.Conditional, reason.PlanConditional, `"tenant" = $1`, "conditional"},
		{"no role deletes", viewer, "orders:delete", plan.AlwaysDenied, reason.PolicyDeny, "1 = 0", "always_denied"},
		{"a refused token", engine.BearerToken("garbage"), "orders:read", plan.AlwaysDenied, reason.TokenMalformed, "1 = 0", ""},
		{"a spent budget", viewer, "orders:read", plan.AlwaysDenied, reason.RateLimited, "1 = 0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := len(sink.Records())
			res, err := e.PlanResources(ctx, tt.cred, tt.action, "", plan.Postgres)
			if err != nil {
				t.Fatal(err)
			}
			if res.Plan.Kind != tt.kind || res.Decision.Reason != tt.code || res.Plan.SQL.Where != tt.where || res.Decision.DecisionID == "" {
				t.Errorf("plan %+v reason %s", res.Plan, res.Decision.Reason)
			}
			recs := sink.Records()
			if len(recs) != n+1 {
				t.Fatalf("%d audit records, want one more", len(recs)-n)
			}
			rec := recs[n]
			if rec.Plan != tt.auditPlan || rec.Reason != string(res.Decision.Reason) || rec.Resource.Type != "orders" || rec.DecisionID != res.Decision.DecisionID {
				t.Errorf("audit record %+v", rec)
			}
		})
	}

	if _, err := e.PlanResources(ctx, viewer, "orders:read", "", "oracle"); reason.Of(err, "") != reason.InputInvalid {
		t.Errorf("unknown dialect: %v", err)
	}

	cfg = prodConfig(p.JWKSURL())
	cfg.Policy.Mode = config.PolicyModeDryRun
	dry := newEngine(t, cfg, engine.Deps{})
	res, err := dry.PlanResources(ctx, viewer, "orders:delete", "orders", plan.SQLite)
	if err != nil || res.Plan.Kind != plan.AlwaysAllowed || res.Decision.Reason != reason.PolicyDryRun || res.Plan.SQL.Where != "1 = 1" {
		t.Errorf("dry-run: %+v %s %v", res.Plan, res.Decision.Reason, err)
	}
}
