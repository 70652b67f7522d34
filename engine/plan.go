package engine

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/plan"
	"github.com/svc-dev/svc/reason"
)

// PlanResources is Decide under ScopePlan for cred: which resources of
// resourceType (the action's prefix when "") may the caller perform
// action on, with the SQL in dialect.
func (e *Engine) PlanResources(ctx context.Context, cred Credential, action, resourceType string, dialect plan.Dialect) (Result, error) {
	return e.Decide(ctx, Request{
		Scope: ScopePlan, Credential: cred, Source: sourceOf(ctx), Dialect: dialect,
		Input: Input{Action: action, Resource: policy.Resource{Type: resourceType}},
	})
}

// planScope is Decide under ScopePlan: authorize's credential, input and
// budget steps, then planResources; a refusal before the policy plans
// always_denied.
func (e *Engine) planScope(ctx context.Context, req *Request) (Result, error) {
	if _, err := plan.ParseDialect(string(req.Dialect)); err != nil {
		return Result{}, reason.Wrap(reason.InputInvalid, err, "resource plan")
	}
	if typ, _, ok := strings.Cut(req.Input.Action, ":"); ok && req.Input.Resource.Type == "" {
		req.Input.Resource.Type = typ
	}
	req.Input.Resource = policy.Resource{Type: req.Input.Resource.Type}
	req.Input.Request, req.Completer = nil, nil
	res, err := e.authorize(ctx, req)
	if res.Plan.Kind == "" {
		res.Plan = deniedPlan()
	}
	return res, err
}

// deniedPlan permits no resource.
func deniedPlan() Plan {
	return Plan{Kind: plan.AlwaysDenied, SQL: plan.SQL{Where: plan.WhereFalse, Params: []any{}}}
}

// planResources plans for the completed input and records the plan as a
// decision: allowed when always allowed, reason plan-conditional when
// conditional. Under policy.mode = "dry-run" every resource is
// permitted, as every request is.
func (e *Engine) planResources(ctx context.Context, start time.Time, res Result, req *Request) (Result, error) {
	set := e.policies.Load()
	res.Decision = Decision{DecisionID: policy.NewDecisionID(), Revision: set.Revision(), DenyReasons: []string{}}
	p, err := set.PlanResources(ctx, req.Input)
	if err == nil {
		res.Plan = Plan{Kind: p.Kind, Condition: p.Condition}
		if e.dryRun && p.Kind != plan.AlwaysAllowed {
			res.Plan = Plan{Kind: plan.AlwaysAllowed}
			res.Decision.Reason = reason.PolicyDryRun
		}
		res.Plan.SQL, err = plan.Render(res.Plan.Kind, res.Plan.Condition, req.Dialect, e.cfg.ListFilter.Columns)
		var pe *plan.Error
		if errors.As(err, &pe) {
			// An attribute whose name is no column, and none configured.
			err = reason.Wrap(reason.PlanUnsupported, err, "render the plan as SQL")
		}
	}
	if err != nil {
		res.Plan = Plan{}
		res.Decision.Reason = reason.Of(err, reason.PolicyError)
		if logErr := e.record(ctx, start, res, req); logErr != nil {
			return unlogged(res, logErr)
		}
		return res, err
	}
	switch {
	case res.Decision.Reason == reason.PolicyDryRun:
		res.Decision.Allow = true
	case p.Kind == plan.AlwaysAllowed:
		res.Decision.Allow, res.Decision.Reason = true, reason.PolicyAllow
	case p.Kind == plan.AlwaysDenied:
		res.Decision.Reason = reason.PolicyDeny
	default:
		res.Decision.Reason = reason.PlanConditional
	}
	if logErr := e.record(ctx, start, res, req); logErr != nil {
		res, err := unlogged(res, logErr)
		res.Plan = deniedPlan()
		return res, err
	}
	return res, nil
}
