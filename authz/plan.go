package authz

import (
	"context"
	"math"

	"google.golang.org/protobuf/encoding/protojson"

	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/plan"
	"github.com/svc-dev/svc/reason"
)

// PlanRequest asks which resources of ResourceType the bearer of Token
// may perform Action on.
type PlanRequest struct {
	// Token is the credential, as for AuthorizeRequest.Token.
	Token string
	// Action is "<resource>:<verb>", e.g. "orders:read". Required.
	Action string
	// ResourceType is the kind of resource listed; "" is the action's
	// prefix.
	ResourceType string
	// Dialect is the dialect of Plan.SQL; "" is plan.Postgres.
	Dialect plan.Dialect
}

// Plan is a resource plan: every resource of the type, none, or those
// meeting Condition. SQL is the same as a WHERE clause with bind
// parameters, e.g.
//
//	rows, err := db.QueryContext(ctx, "SELECT id, title FROM orders WHERE "+p.SQL.Where, p.SQL.Params...)
//
// Condition.SQL renders it again with other columns or a parameter
// offset.
type Plan struct {
	// Kind is plan.AlwaysAllowed, plan.AlwaysDenied or plan.Conditional.
	Kind plan.Kind
	// Condition is set when Kind is plan.Conditional.
	Condition *plan.Condition
	// SQL is the WHERE clause and its parameters: "1 = 1" when always
	// allowed, "1 = 0" when always denied.
	SQL plan.SQL
	// Reason is "plan-conditional", "policy-allow", "policy-deny",
	// "rate-limited" or the credential's failure code.
	Reason reason.Code
	// DecisionID names the plan in the audit record and decision log.
	DecisionID string
	// Subject and TenantID are the accepted credential's.
	Subject, TenantID string
	// PolicyRevision is the revision of the policy set that planned.
	PolicyRevision string
	// Message explains a refused credential.
	Message string
}

// PlanResources asks the sidecar for the resource plan of req. A plan
// never fails open: when the sidecar is unreachable or cannot plan, the
// error is an *UnavailableError in both fail modes, since permitting
// every row of a list is not a safe default. A policy the plan cannot
// express is a *reason.Error with code reason.PlanUnsupported; a
// malformed request one with reason.InputInvalid.
func (c *Client) PlanResources(ctx context.Context, req PlanRequest) (Plan, error) {
	if req.Action == "" {
		return Plan{}, reason.New(reason.InputInvalid, "authz: plan-resources: an action is required")
	}
	if _, err := plan.ParseDialect(string(req.Dialect)); err != nil {
		return Plan{}, reason.Wrap(reason.InputInvalid, err, "authz: plan-resources")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.t.planResources(ctx, &authzv1.PlanResourcesRequest{
		Token: req.Token, Action: req.Action, ResourceType: req.ResourceType, Dialect: string(req.Dialect),
	})
	if err != nil {
		err = c.callError(ctx, "plan-resources", err)
		if err == errFailOpen {
			err = &UnavailableError{Op: "plan-resources", Reason: reason.Unavailable}
		}
		return Plan{}, err
	}
	return PlanFromProto(resp)
}

// PlanFromProto converts the answer of PlanResources; a condition or
// kind that is not well formed is an error (reason.PolicyError).
func PlanFromProto(m *authzv1.PlanResourcesResponse) (Plan, error) {
	p := Plan{
		Kind: plan.Kind(m.GetKind()), Reason: reason.Code(m.GetReason()), DecisionID: m.GetDecisionId(),
		Subject: m.GetSubject(), TenantID: m.GetTenantId(), PolicyRevision: m.GetPolicyRevision(), Message: m.GetMessage(),
		SQL: plan.SQL{Where: m.GetSql().GetWhere(), Params: []any{}},
	}
	if !p.Kind.Valid() {
		return Plan{}, reason.New(reason.PolicyError, "authz: plan-resources: the sidecar answered the unknown plan kind %q", p.Kind)
	}
	for _, v := range m.GetSql().GetParams().GetValues() {
		p.SQL.Params = append(p.SQL.Params, paramOf(v.AsInterface()))
	}
	if c := m.GetCondition(); c != nil {
		raw, err := protojson.Marshal(c)
		if err == nil {
			p.Condition = &plan.Condition{}
			err = p.Condition.UnmarshalJSON(raw)
		}
		if err != nil {
			return Plan{}, reason.Wrap(reason.PolicyError, err, "authz: plan-resources: the sidecar's condition")
		}
	}
	if p.Kind == plan.Conditional && p.Condition == nil {
		return Plan{}, reason.New(reason.PolicyError, "authz: plan-resources: a conditional plan without a condition")
	}
	return p, nil
}

// paramOf is a parameter as a database driver takes it: a whole number
// an int64, as the sidecar sent it (JSON numbers arrive as float64).
func paramOf(v any) any {
	f, ok := v.(float64)
	if ok && f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
		return int64(f)
	}
	return v
}
