// Package authz is the Go client of svc's own decision API: the Go SDK
// with fail modes (Client), talking to the sidecar over the svc.authz.v1
// gRPC service or its local HTTP JSON mirror, and net/http middleware
// (Middleware) that protects handlers with any Authorizer.
//
// The package links neither the engine nor a policy or JWT library: it
// depends on the API types (authz/v1), gRPC and the standard library, so
// that an application that only calls the sidecar stays small. The server
// side of the API and the in-process Authorizer over an embedded engine
// are in package github.com/svc-dev/svc/authz/server.
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

	"github.com/svc-dev/svc/reason"
)

// Fail modes of a Client, a local authorizer or a route of the Middleware.
const (
	// FailOpen allows a request when the decision service cannot be
	// reached, with no claims and reason "fail-open". It is the default.
	FailOpen = "open"
	// FailClosed denies a request when the decision service cannot be
	// reached: the SDK returns an *UnavailableError, the middleware 503.
	FailClosed = "closed"
)

// AnonymousSubject is the subject of a request admitted without verified
// claims: in development mode, on fail-open and for an allowed anonymous
// request.
const AnonymousSubject = "anonymous"

// DefaultSidecarAddr is the sidecar's gRPC address when none is given
// (sdk.sidecar_addr's default).
const DefaultSidecarAddr = "[::1]:50051"

// Authorizer answers the middleware's questions. Both *Client (through the
// sidecar) and the in-process adapter of package authz/server implement
// it.
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
	// DecisionID identifies this answer in the audit record and the
	// decision log; empty when the answer did not come from the engine
	// (the client's fail mode).
	DecisionID string `json:"decision_id,omitempty"`
}

// Resource is what an action applies to (input.resource).
type Resource struct {
	// Type is the resource kind ("orders"); the action's prefix.
	Type string `json:"type,omitempty"`
	// ID identifies the resource, when known.
	ID string `json:"id"`
	// Tenant owns the resource; defaults to the deployment's tenant.
	Tenant string `json:"tenant"`
	// Attributes are what the application knows about the resource
	// (owner, status, department…), as JSON values: the policy sees them
	// as input.resource.attributes. At most MaxAttributes of them, keys
	// of at most MaxAttributeKeyLen bytes, nested at most
	// MaxAttributesDepth deep and MaxAttributesSize bytes as JSON; a
	// request over a bound is a *reason.Error with code
	// reason.InputInvalid.
	Attributes map[string]any `json:"attributes,omitempty"`
}

// RequestInfo describes the HTTP request being authorized (input.request).
type RequestInfo struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Host    string            `json:"host,omitempty"`
	Query   map[string]string `json:"query,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// SourceIP is the address of the client as the proxy saw it. The
	// svc.authz.v1 API does not carry it: the sidecar's policy input has
	// it only from its own proxy checks.
	SourceIP string `json:"source_ip,omitempty"`
}

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
	return TokenDecision{Allowed: true, Reason: reason.FailOpen, Subject: AnonymousSubject,
		Message: "decision service unavailable; allowed by fail_mode=open"}
}

// failOpenDecision is the authorization decision of a fail-open client
// that could not reach the sidecar.
func failOpenDecision() Decision {
	return Decision{Allowed: true, Reason: reason.FailOpen, DenyReasons: []string{}, Subject: AnonymousSubject,
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
