package engine

import (
	"time"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/plan"
	"github.com/svc-dev/svc/reason"
)

// Input is the policy input document; see policy.Input.
type Input = policy.Input

// TokenDecision is the verdict on a credential: what ValidateToken
// returns (Decide under ScopeToken), and Result.Token.
type TokenDecision struct {
	// Allowed is true when the token verified (or in development mode).
	Allowed bool `json:"allowed"`
	// Claims is the verified claim set, custom claims untouched; nil in
	// development mode and on failure.
	Claims map[string]any `json:"claims"`
	// Reason is a stable code: "ok", "dev-anonymous" or the failure.
	Reason reason.Code `json:"reason"`
	// Subject is the sub claim, or "anonymous" in development mode.
	Subject string `json:"subject,omitempty"`
	// TenantID is the tenant_id claim.
	TenantID string `json:"tenant_id,omitempty"`
	// Message explains a failure; it never holds token or key material.
	Message string `json:"message,omitempty"`
	// Kind is the kind of credential that proved the identity (KindJWT,
	// KindIntrospection, KindAPIKey, KindMTLS, KindSession); empty on
	// failure and in development mode for an anonymous caller.
	Kind string `json:"kind,omitempty"`
	// DecisionID identifies this answer in the audit and decision logs;
	// set by Decide under ScopeToken (ValidateToken). Under
	// ScopeAuthorize the id is Result.Decision.DecisionID.
	DecisionID string `json:"decision_id,omitempty"`
}

// The kinds of credential (TokenDecision.Kind, input.identity.kind).
const (
	// KindJWT is a JWT verified against an identity provider's keys.
	KindJWT = "jwt"
	// KindIntrospection is an opaque token its issuer vouched for
	// (RFC 7662 introspection).
	KindIntrospection = "introspection"
	// KindAPIKey is an API key of api_keys.file.
	KindAPIKey = "api_key"
	// KindMTLS is a client certificate the proxy verified.
	KindMTLS = "mtls"
	// KindSession is a session token of the sign-in gateway.
	KindSession = "session"
)

// Decision is the result of a policy evaluation.
type Decision struct {
	// Allow is the value of data.svc.authz.allow (false when undefined).
	Allow bool `json:"allow"`
	// DenyReasons is data.svc.authz.deny_reasons, sorted.
	DenyReasons []string `json:"deny_reasons"`
	// DecisionID identifies this evaluation in logs, traces and audit.
	DecisionID string `json:"decision_id"`
	// Reason is "policy-allow", "policy-deny", "rate-limited" or a token
	// failure code when the decision stopped before the policy.
	Reason reason.Code `json:"reason"`
	// Revision is the revision of the policy set that decided.
	Revision string `json:"revision,omitempty"`
	// RetryAfter is set when Reason is "rate-limited".
	RetryAfter time.Duration `json:"retry_after,omitempty"`
}

// Result is the outcome of Decide: under ScopeAuthorize (Authorize) the
// token decision, then (when the token was accepted) the policy decision
// on the completed input; under ScopeToken the token decision alone;
// under ScopePolicy the policy decision on the input as given; under
// ScopePlan the token decision and the resource plan (Plan), with
// Decision holding its id, revision and reason.
type Result struct {
	Token    TokenDecision `json:"token"`
	Decision Decision      `json:"decision"`
	// Input is the input as evaluated, user filled from verified claims.
	// The user's Roles and Claims are shared with the verified-token
	// cache and with every request presenting the same token (claims like
	// Token.Claims): treat them as read-only, and copy them to modify.
	Input Input `json:"input"`
	// Plan is the resource plan of ScopePlan.
	Plan Plan `json:"plan,omitzero"`
}

// Plan is a resource plan: which resources of a type the caller may act
// on, as a condition and as SQL.
type Plan struct {
	// Kind is plan.AlwaysAllowed, plan.AlwaysDenied (a refused
	// credential and a spent budget included) or plan.Conditional.
	Kind plan.Kind `json:"kind"`
	// Condition is set for plan.Conditional; shared and read-only.
	Condition *plan.Condition `json:"condition,omitempty"`
	// SQL is the plan as a WHERE clause in the request's dialect, with
	// list_filter.columns naming the columns.
	SQL plan.SQL `json:"sql"`
}

// Allowed reports whether both authentication and policy allowed.
func (r Result) Allowed() bool { return r.Token.Allowed && r.Decision.Allow }
