// Package authz is svc's own decision API: the svc.authz.v1 gRPC service
// (Server), its local HTTP JSON mirror (Server.RegisterHTTP), the Go client
// SDK with fail modes (Client) and net/http middleware (Middleware).
//
// The package holds no policy or JWT logic of its own: every decision comes
// from the engine, in the sidecar (Server, Client) or in-process (Local).
// authz only translates between the engine and its callers and chooses
// transport statuses at this edge.
//
// Fail modes apply on the client side (Client, Middleware):
//
//	fail_mode | sidecar unreachable                | invalid token
//	open      | allow, claims nil, reason fail-open | 401
//	closed    | 503 (*UnavailableError)             | 401
package authz

import (
	"context"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/engine/reason"
)

// Fail modes of a Client, a Local authorizer or a route of the Middleware.
const (
	// FailOpen allows a request when the decision service cannot be
	// reached, with no claims and reason "fail-open". It is the default.
	FailOpen = config.FailOpen
	// FailClosed denies a request when the decision service cannot be
	// reached: the SDK returns an *UnavailableError, the middleware 503.
	FailClosed = config.FailClosed
)

// Decider is the decision engine as this package uses it. *engine.Engine
// implements it; Server and Local are built on one.
type Decider interface {
	// ValidateToken verifies a bearer token. Every outcome, including a
	// rejection, is a TokenDecision with a stable reason code.
	ValidateToken(ctx context.Context, token string) engine.TokenDecision
	// Authorize verifies the token, completes in (user from the verified
	// claims, tenant from the configuration) and evaluates the policy. An
	// error means the engine could not decide (reason.PolicyError).
	Authorize(ctx context.Context, token string, in engine.Input) (engine.Result, error)
}

// Authorizer answers the middleware's questions. Both *Client (through the
// sidecar) and the adapter returned by Local (in-process) implement it.
type Authorizer interface {
	// ValidateToken returns the token decision. An error wrapping
	// ErrUnavailable means no decision could be obtained.
	ValidateToken(ctx context.Context, token string) (TokenDecision, error)
	// Authorize returns the authorization decision for req. An error
	// wrapping ErrUnavailable means no decision could be obtained.
	Authorize(ctx context.Context, req AuthorizeRequest) (Decision, error)
	// FailMode is FailOpen or FailClosed: what the Authorizer does when no
	// decision can be obtained, and the middleware's default.
	FailMode() string
}

// TokenDecision is the result of ValidateToken: allowed, the verified
// claims (nil in development mode, on rejection and on fail-open) and a
// stable reason code.
type TokenDecision = engine.TokenDecision

// Resource is what an action applies to (input.resource).
type Resource = policy.Resource

// RequestInfo describes the HTTP request being authorized (input.request).
type RequestInfo = policy.Request

// AuthorizeRequest asks whether the bearer of Token may perform Action on
// Resource. There is no user field: the policy's user always comes from
// the verified token.
type AuthorizeRequest struct {
	// Token is the bearer JWT without the "Bearer " prefix.
	Token string
	// Action is "<resource>:<verb>", e.g. "orders:read". Required.
	Action string
	// Resource is the object of the action. An empty Type is taken from
	// the action's prefix; an empty Tenant means the deployment's tenant.
	Resource Resource
	// Request optionally describes the HTTP request being authorized.
	// Authorization, Proxy-Authorization and Cookie headers are dropped.
	Request *RequestInfo
}

// Decision is the outcome of Authorize: a token check followed, when the
// token was accepted, by a policy evaluation.
type Decision struct {
	// Allowed is true when the token was accepted and the policy allowed
	// (or, on fail-open, when no decision could be obtained).
	Allowed bool `json:"allowed"`
	// Reason is "policy-allow", "policy-deny", "rate-limited", a token
	// failure code such as "token-expired", or "fail-open".
	Reason reason.Code `json:"reason"`
	// DenyReasons is the policy's deny_reasons, sorted; never nil.
	DenyReasons []string `json:"deny_reasons"`
	// DecisionID identifies the policy evaluation; empty when the policy
	// was not evaluated.
	DecisionID string `json:"decision_id,omitempty"`
	// Subject is the sub claim of the accepted token, or "anonymous" in
	// development mode and on fail-open.
	Subject string `json:"subject,omitempty"`
	// TenantID is the tenant_id claim of the accepted token.
	TenantID string `json:"tenant_id,omitempty"`
	// Claims is the verified claim set; nil in development mode, on
	// rejection and on fail-open.
	Claims map[string]any `json:"claims"`
	// PolicyRevision is the revision of the policy set that decided.
	PolicyRevision string `json:"policy_revision,omitempty"`
	// RetryAfter is set when Reason is "rate-limited".
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// Message explains a token rejection; it never holds secrets.
	Message string `json:"message,omitempty"`
}

// failOpenToken is the token decision of a fail-open client that could not
// reach the sidecar.
func failOpenToken() TokenDecision {
	return TokenDecision{Allowed: true, Reason: reason.FailOpen, Subject: engine.AnonymousSubject,
		Message: "decision service unavailable; allowed by fail_mode=open"}
}

// failOpenDecision is the authorization decision of a fail-open client
// that could not reach the sidecar.
func failOpenDecision() Decision {
	return Decision{Allowed: true, Reason: reason.FailOpen, DenyReasons: []string{}, Subject: engine.AnonymousSubject,
		Message: "decision service unavailable; allowed by fail_mode=open"}
}

// checkFailMode returns the fail mode, FailOpen when empty, or an error
// for an unknown one.
func checkFailMode(mode string) (string, error) {
	switch mode {
	case "":
		return FailOpen, nil
	case FailOpen, FailClosed:
		return mode, nil
	}
	return "", reason.New(reason.InputInvalid, "fail mode %q is neither %q nor %q", mode, FailOpen, FailClosed)
}
