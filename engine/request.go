package engine

import (
	"context"
	"fmt"

	"github.com/svc-dev/svc/engine/apikey"
	"github.com/svc-dev/svc/engine/clientcert"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/plan"
)

// Request is one decision request: everything a decision depends on,
// answered by Decide. Every surface (Envoy's Check, the HTTP check, the
// gRPC and HTTP API, in-process callers) asks through one; the variants
// of a decision are its fields.
type Request struct {
	// Scope is what to decide; the zero value, ScopeAuthorize, is the
	// whole decision.
	Scope Scope
	// Credential is what the caller presented to prove who it is.
	Credential Credential
	// Input is the policy input: the action, the resource and, for a
	// request that has one, the HTTP request (Input.Request). Under
	// ScopeAuthorize its User and Tenant are replaced from the verified
	// identity and the configuration, an empty Resource.Tenant becomes
	// the deployment's, and Input.Request's CanonicalPath and Format are
	// set from its Path (in the caller's policy.Request, which must not
	// be shared with a concurrent call) unless Canonical says they are.
	Input Input
	// Source is the surface the decision was asked through ("envoy",
	// "http-check", "grpc", "http", "sdk"); it lands in the audit record.
	Source string
	// Completer, when not nil, fills in the Headers and Query that
	// Input.Request still lacks, only when something can read them: the
	// active policy set can observe them (policy.Set.ReadsRequestParts,
	// asked of the very set that decides), the input goes on a span for
	// a live watcher, or a decision observer sees the decision. The
	// decision, the audit record and what observers see are those of the
	// completed input; only Result.Input.Request may lack the two maps
	// when nothing read them. Ignored without Input.Request.
	Completer RequestCompleter
	// Canonical says that Input.Request's CanonicalPath and Format were
	// computed from its Path by reqpath with the engine's path rules
	// (envoy.routes_case_sensitive, envoy.format_suffixes), as envoy's
	// Mapper does, and that its Path has a single meaning: the engine
	// then takes them as they are. Only the code that computed them sets
	// it; a path from anywhere else is made canonical by the engine.
	Canonical bool
	// Dialect is the SQL dialect of ScopePlan's WHERE clause; "" is
	// plan.Postgres.
	Dialect plan.Dialect
	// Refused, when not nil, is the asking surface's refusal of a request
	// it could not read into a policy input (a path without a single
	// meaning, a method it cannot trust): an error carrying the refusal's
	// reason code (reason.InputInvalid when it carries none). Under
	// ScopeAuthorize no credential is judged and no policy runs: Decide
	// denies with that code, under a decision id of its own, and records
	// the answer like every other, with Input holding what could be read
	// of the request.
	Refused error
}

// Credential is what a caller presents to prove who it is: a bearer
// token, an API key, or the client certificate its proxy verified. Other
// kinds (opaque tokens) are to be further fields. A Bearer that starts
// with the API-key prefix ("svck_", which no JWT does) is judged as an
// API key, as CredentialOf classifies it: whichever door a key comes
// through, it is never taken for an opaque token. When both a bearer
// token and an API key are set, the API key is judged; the client
// certificate identifies the caller only when neither is set (a mesh
// workload calling without a token), and only with
// client_certs.trust_domains set.
type Credential struct {
	// Bearer is a bearer token (a JWT) without the "Bearer " prefix;
	// empty when the caller presented none.
	Bearer string
	// APIKey is an API key ("svck_..."), without the "ApiKey " prefix
	// of an Authorization header, checked against api_keys.file; empty
	// when the caller presented none.
	APIKey string
	// ClientCert is what the proxy vouched for about the client
	// certificate it verified: Envoy's source principal and certificate,
	// or an X-Forwarded-Client-Cert header from a trusted proxy; zero
	// when there is none.
	ClientCert clientcert.Presented
}

// BearerToken is the Credential of a bearer token raw, without the
// "Bearer " prefix.
func BearerToken(raw string) Credential { return Credential{Bearer: raw} }

// APIKey is the Credential of an API key.
func APIKey(key string) Credential { return Credential{APIKey: key} }

// CredentialOf is the Credential of a string passed where a bearer token
// is expected (the token field of the API): an API key when it starts
// with "svck_", which no JWT does, else a bearer token.
func CredentialOf(raw string) Credential {
	if apikey.IsKey(raw) {
		return APIKey(raw)
	}
	return BearerToken(raw)
}

// Scope is what a Request asks the engine to decide.
type Scope uint8

const (
	// ScopeAuthorize verifies the credential, completes the input from
	// the verified identity and the configuration, takes one request
	// from the tenant's budget and evaluates the policy: the decision
	// Authorize returns. It is counted, audited and observed.
	ScopeAuthorize Scope = iota
	// ScopeToken verifies the credential, refuses an authentic token of
	// a tenant the deployment does not serve (reason.TenantMismatch) and
	// takes one request from the tenant's budget; no policy runs. The
	// answer is Result.Token, as ValidateToken returns it.
	ScopeToken
	// ScopePolicy evaluates the active policy on Input as given: no
	// credential, no budget, no canonical path, no audit record. The
	// answer is Result.Decision, as Evaluate returns it.
	ScopePolicy
	// ScopePlan verifies the credential, completes the input and takes
	// one request from the budget as ScopeAuthorize does, then plans
	// instead of deciding: which resources of Input.Resource.Type may
	// the caller perform Input.Action on (Result.Plan). Input.Resource's
	// other fields are ignored: they are what the plan leaves open. A
	// refused credential or a spent budget plans plan.AlwaysDenied. A
	// policy the plan cannot express is an error (reason.PlanUnsupported),
	// as is an unknown Dialect (reason.InputInvalid).
	ScopePlan
)

// RequestCompleter fills in the parts of a policy input's request that
// cost the most to build: its Headers and Query. CompleteRequest is called
// at most once per request that needs them, before anything reads them,
// on the goroutine that asked for the decision; it must give the maps the
// caller would otherwise have set, and must not touch the other fields.
type RequestCompleter interface {
	CompleteRequest(r *policy.Request)
}

// RequestSource is what a RequestCompleter may also offer for the
// decision log, which writes every decision's request headers and query:
// them as CompleteRequest would set them, read from where they come
// from, so that the record of a decision that nothing else read them
// for does not have them built as maps first.
type RequestSource interface {
	// SourceHeaders is the map CompleteRequest builds Headers from:
	// Headers holds its entries whose key KeepHeader keeps.
	SourceHeaders() map[string]string
	KeepHeader(k string) bool
	// SourceQuery is the Query CompleteRequest sets.
	SourceQuery() map[string]string
}

// recordSource is where the decision record reads the headers and query
// of req's input: req.Completer when it is a RequestSource and they are
// not built yet, else nil, once the Completer (if any) has built them.
func (e *Engine) recordSource(req *Request) RequestSource {
	r := req.Input.Request
	if r != nil && r.Headers == nil && r.Query == nil {
		if src, ok := req.Completer.(RequestSource); ok {
			return src
		}
	}
	if req.Completer != nil {
		req.Completer.CompleteRequest(r)
	}
	return nil
}

// Decide answers req. It is the engine's one door to a decision:
// ValidateToken, Authorize and Evaluate are Decide with a Scope.
//
// An invalid credential, a request path without a single meaning
// (reason.PathInvalid), a request its surface refused (Request.Refused)
// or an exhausted budget is a Result with the reason, not an error; an
// error means the engine could not decide (reason.PolicyError) and the
// caller applies its fail mode. Under ScopeToken there is never an error.
func (e *Engine) Decide(ctx context.Context, req Request) (Result, error) {
	if req.Input.Request == nil {
		req.Completer = nil
	}
	switch req.Scope {
	case ScopeAuthorize:
		if req.Refused != nil {
			return e.refuse(ctx, &req)
		}
		return e.authorize(ctx, &req)
	case ScopePlan:
		return e.planScope(ctx, &req)
	case ScopeToken:
		return e.validate(ctx, &req), nil
	case ScopePolicy:
		d, err := e.evaluate(ctx, req.Input, req.Completer)
		return Result{Decision: d, Input: req.Input}, err
	}
	return Result{}, fmt.Errorf("engine: unknown decision scope %d", req.Scope)
}

type sourceKey struct{}

// WithSource tags ctx with the surface a decision was asked through
// ("envoy", "grpc", "http", "sdk"), for Authorize to record in the audit
// record. Decide takes it as Request.Source instead.
func WithSource(ctx context.Context, source string) context.Context {
	return context.WithValue(ctx, sourceKey{}, source)
}

func sourceOf(ctx context.Context) string {
	s, _ := ctx.Value(sourceKey{}).(string)
	return s
}

// ValidateToken verifies a bearer token: Decide under ScopeToken. It never
// returns an error: every outcome is a TokenDecision with a stable reason
// code.
//
// ValidateToken runs no policy, so it also refuses an authentic token of a
// tenant the deployment does not serve (reason tenant-mismatch): one other
// than sdk.tenant_id and not listed in sdk.accepted_tenants. A deployment
// with neither set serves every tenant.
func (e *Engine) ValidateToken(ctx context.Context, raw string) TokenDecision {
	res, _ := e.Decide(ctx, Request{Scope: ScopeToken, Credential: BearerToken(raw)})
	return res.Token
}

// Authorize is Decide under ScopeAuthorize for a bearer token and in,
// recording the source ctx was tagged with (WithSource): it verifies the
// token, fills in.User and in.Tenant from the verified claims and the
// configuration (whatever the caller put there is replaced), sets
// in.Request's CanonicalPath and Format from its Path (in the caller's
// Request, which must not be shared with a concurrent call), applies the
// tenant's rate limit and evaluates the policy.
//
// An invalid token, a request path without a single meaning
// (reason.PathInvalid) or an exhausted budget is a Result with the
// reason, not an error; an error means the engine could not decide
// (reason.PolicyError) and the caller applies its fail mode.
func (e *Engine) Authorize(ctx context.Context, raw string, in Input) (Result, error) {
	return e.Decide(ctx, Request{Credential: BearerToken(raw), Input: in, Source: sourceOf(ctx)})
}

// Evaluate runs the active policy on in as given: Decide under
// ScopePolicy. A repeated input is answered from the active set's
// decision cache (policy.Set.Decide).
func (e *Engine) Evaluate(ctx context.Context, in Input) (Decision, error) {
	res, err := e.Decide(ctx, Request{Scope: ScopePolicy, Input: in})
	return res.Decision, err
}
