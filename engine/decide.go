package engine

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/engine/apikey"
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/devissuer"
	"github.com/svc-dev/svc/engine/introspect"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/engine/ratelimit"
	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/reason"
)

// validate is Decide under ScopeToken: the token decision, with a
// decision id, audited and written to the decision log like every other
// answer. A decision log that cannot take the record (a full spool under
// decision_log.overflow = "deny", a spool that cannot be written)
// refuses the token (decision-log-unavailable) rather than answer
// unlogged, with the decision log's reason.
func (e *Engine) validate(ctx context.Context, req *Request) Result {
	start := e.now()
	d := e.validateToken(ctx, req.Credential)
	d.DecisionID = policy.NewDecisionID()
	rec := Result{Token: d, Decision: Decision{
		Allow: d.Allowed, Reason: d.Reason, DenyReasons: []string{}, DecisionID: d.DecisionID,
	}}
	if err := e.record(ctx, start, rec, req); err != nil {
		msg := "the decision log cannot take the decision"
		var re *reason.Error
		if errors.As(err, &re) && re.Msg != "" {
			msg = re.Msg
		}
		d = TokenDecision{Reason: reason.DecisionLogUnavailable, DecisionID: d.DecisionID, Message: msg}
	}
	return Result{Token: d}
}

// validateToken is the token decision of ScopeToken: the credential
// verified, the tenant served, one request taken from its budget.
func (e *Engine) validateToken(ctx context.Context, cred Credential) TokenDecision {
	ctx, span := e.tel.startVerify(ctx)
	d, _ := e.verifyCredential(ctx, cred)
	if d.Allowed && d.Reason == reason.OK {
		if !e.cfg.SDK.AcceptsTenant(d.TenantID) {
			d = TokenDecision{Reason: reason.TenantMismatch, Message: "the token's tenant is not served by this deployment"}
		} else if ok, _ := e.allowRate(ctx, d.TenantID); !ok {
			// A validation is a request of the tenant like any other:
			// validate-only callers must not escape its budget.
			d = TokenDecision{Reason: reason.RateLimited, Message: "the tenant's request budget is spent"}
		}
	}
	e.tel.endVerify(ctx, span, d)
	return d
}

// allowRate takes one request from tenant's budget. When the shared
// limiter fails (Redis down) the fallback mode decides
// (rate_limit.redis_fallback: local budgets, deny, or allow uncounted), and
// a warning says so at most once per limiterWarnEvery, with the count of
// requests decided by the fallback meanwhile. A limiter that fails
// without a fallback lets the request through uncounted.
func (e *Engine) allowRate(ctx context.Context, tenant string) (bool, time.Duration) {
	if e.limiter == nil {
		return true, 0
	}
	ok, wait, err := e.limiter.Allow(ctx, tenant)
	if err == nil {
		return ok, wait
	}
	var fe *ratelimit.FallbackError
	fallback := errors.As(err, &fe)
	if !fallback {
		ok, wait = true, 0
	}
	n := e.uncounted.Add(1)
	if e.limiterWarned.Allow(e.now(), limiterWarnEvery) {
		e.uncounted.Add(-n)
		if fallback && fe.Mode != ratelimit.FallbackAllow {
			e.log.WarnContext(ctx, "rate limiter's Redis unavailable; requests limited by the fallback mode",
				"mode", string(fe.Mode), "err", fe.Err, "fallback_decisions", n, "next_warning_in", limiterWarnEvery.String())
		} else {
			e.log.WarnContext(ctx, "rate limiter unavailable; requests pass uncounted", "err", err,
				"uncounted", n, "next_warning_in", limiterWarnEvery.String())
		}
	}
	return ok, wait
}

// limiterWarnEvery spaces the warnings of a failing rate limiter, so that
// an outage of Redis does not write one line per request.
const limiterWarnEvery = 30 * time.Second

// verifyCredential verifies cred: the one place a credential is judged,
// for ScopeToken and ScopeAuthorize alike. An API key, or a bearer that
// starts with the API-key prefix (CredentialOf's rule), is looked up in
// api_keys.file (verifyAPIKey). With [introspection], a bearer that is
// not a JWS is an opaque token for the introspection endpoint
// (verifyOpaque); without a token or key, a client certificate is judged
// against [client_certs] (verifyClientCert). Any other token goes to one
// token.Chain call, which hashes it once for every verifier. user is the
// policy input's user for an accepted token, built once per verification
// (principalDeriver), or nil when userFrom must build it.
func (e *Engine) verifyCredential(ctx context.Context, cred Credential) (TokenDecision, *principal) {
	if cred.APIKey == "" && apikey.IsKey(cred.Bearer) {
		// A bearer with the API-key prefix is an API key whatever door it
		// came through (Authorization: Bearer, the session cookie): it is
		// judged against api_keys.file, and never sent to the
		// introspection endpoint as an opaque token.
		cred.APIKey, cred.Bearer = cred.Bearer, ""
	}
	if cred.APIKey != "" && !e.devMode {
		return e.verifyAPIKey(cred.APIKey)
	}
	raw := cred.Bearer
	if raw == "" {
		// Development mode takes an API key as any other credential.
		raw = cred.APIKey
	}
	if raw == "" {
		if e.clientCerts != nil && !cred.ClientCert.IsZero() {
			// A certificate identifies only a caller that presents no
			// other credential.
			return e.verifyClientCert(cred.ClientCert)
		}
		return TokenDecision{Reason: reason.TokenMissing, Message: "no bearer token"}, nil
	}
	if e.introspector != nil && !introspect.LooksLikeJWS(raw) {
		return e.verifyOpaque(ctx, raw)
	}
	tokens := e.tokens
	if e.devMode {
		if e.dev == nil || !devissuer.IssuedBy(raw) {
			return TokenDecision{Allowed: true, Reason: reason.DevAnonymous, Subject: AnonymousSubject, TenantID: e.cfg.SDK.TenantID}, nil
		}
		tokens = e.devChain
	}
	claims, derived, err := tokens.VerifyDerived(ctx, raw)
	if err != nil {
		var re *reason.Error
		if errors.As(err, &re) {
			return TokenDecision{Reason: re.Code, Message: re.Msg}, nil
		}
		return TokenDecision{Reason: reason.TokenMalformed, Message: "token rejected"}, nil
	}
	var sub, tenant string
	p := derivedPrincipal(derived)
	if p != nil {
		// principalDeriver took both from these claims when the token
		// was verified; the cached user spares two lookups per request.
		sub, tenant = p.user.ID, p.user.TenantID
	} else {
		sub, tenant = identity(claims)
	}
	return TokenDecision{Allowed: true, Claims: claims, Reason: reason.OK, Subject: sub, TenantID: tenant, Kind: p.kind()}, p
}

// identity is the subject and tenant of verified claims.
func identity(claims token.Claims) (sub, tenant string) {
	sub, _ = claims["sub"].(string)
	tenant, _ = claims["tenant_id"].(string)
	return sub, tenant
}

// authorize is the answer of ScopeAuthorize. req is Decide's own copy:
// its Input is completed in place.
func (e *Engine) authorize(ctx context.Context, req *Request) (Result, error) {
	start := e.now()
	var who *principal
	res := Result{}
	vctx, span := e.tel.startVerify(ctx)
	res.Token, who = e.verifyCredential(vctx, req.Credential)
	e.tel.endVerify(vctx, span, res.Token)
	if !res.Token.Allowed {
		// Every decision gets an id, so that a 401 can be matched with its
		// audit record and log line.
		res.Decision = Decision{Reason: res.Token.Reason, DenyReasons: []string{}, DecisionID: policy.NewDecisionID()}
		if err := e.record(ctx, start, res, req); err != nil {
			return unlogged(res, err)
		}
		return res, nil
	}
	in := &req.Input
	if who != nil {
		in.User, in.Identity = who.user, &who.identity
	} else {
		in.User, in.Identity = userFrom(res.Token), nil
	}
	in.Tenant = policy.Tenant{ID: e.cfg.SDK.TenantID, Plan: e.cfg.TenantPlan(e.cfg.SDK.TenantID)}
	if in.Resource.Tenant == "" {
		in.Resource.Tenant = e.cfg.SDK.TenantID
	}
	if in.Request != nil && !req.Canonical {
		if err := e.canonicalize(in.Request); err != nil {
			// Only a caller of Authorize can send such a path: the
			// proxies' mapping refuses it first.
			res.Input = *in
			res.Decision = Decision{Reason: reason.PathInvalid, DenyReasons: []string{string(reason.PathInvalid)}, DecisionID: policy.NewDecisionID()}
			if err := e.record(ctx, start, res, req); err != nil {
				return unlogged(res, err)
			}
			return res, nil
		}
	}
	res.Input = *in
	if ok, wait := e.allowRate(ctx, in.User.TenantID); !ok {
		res.Decision = Decision{Reason: reason.RateLimited, DenyReasons: []string{string(reason.RateLimited)}, RetryAfter: wait, DecisionID: policy.NewDecisionID()}
		if err := e.record(ctx, start, res, req); err != nil {
			return unlogged(res, err)
		}
		return res, nil
	}
	if req.Scope == ScopePlan {
		return e.planResources(ctx, start, res, req)
	}
	d, err := e.evaluate(ctx, *in, req.Completer)
	res.Decision = d
	if e.dryRun && err == nil {
		// policy.mode = "dry-run": the would-be outcome is recorded as
		// simulated and the request goes through.
		if err := e.recordEvaluated(ctx, start, res, req, true); err != nil {
			return unlogged(res, err)
		}
		if !d.Allow {
			res.Decision.Allow = true
			res.Decision.Reason = reason.PolicyDryRun
		}
		return res, nil
	}
	if logErr := e.recordEvaluated(ctx, start, res, req, false); logErr != nil {
		return unlogged(res, logErr)
	}
	return res, err
}

// refuse is the answer of ScopeAuthorize to a request its surface
// refused (Request.Refused): denied with the refusal's code, under a
// decision id, and recorded, so that the answer can be matched with its
// audit and decision log records as any other can.
func (e *Engine) refuse(ctx context.Context, req *Request) (Result, error) {
	start := e.now()
	code := reason.Of(req.Refused, reason.InputInvalid)
	res := Result{Input: req.Input, Decision: Decision{
		Reason: code, DenyReasons: []string{string(code)}, DecisionID: policy.NewDecisionID(),
	}}
	if err := e.record(ctx, start, res, req); err != nil {
		return unlogged(res, err)
	}
	return res, nil
}

// unlogged is the answer to a decision the decision log refused (err,
// decision-log-unavailable): denied, whatever was decided, since
// decision_log.overflow = "deny" prefers no decision to an unlogged one.
func unlogged(res Result, err error) (Result, error) {
	res.Decision.Allow = false
	res.Decision.Reason = reason.DecisionLogUnavailable
	res.Decision.DenyReasons = []string{}
	return res, err
}

// evaluate runs the active policy on in, completing in.Request with rc
// (when not nil) first if the set that decides can read what rc fills in.
func (e *Engine) evaluate(ctx context.Context, in Input, rc RequestCompleter) (Decision, error) {
	ctx, span := e.tel.startEval(ctx)
	set := e.policies.Load()
	if rc != nil {
		if headers, query := set.ReadsRequestParts(); headers || query {
			rc.CompleteRequest(in.Request)
		}
	}
	r, err := set.Decide(ctx, in)
	d := Decision{Allow: r.Allow, DenyReasons: r.DenyReasons, DecisionID: r.DecisionID, Revision: r.Revision, Reason: reason.PolicyDeny}
	if d.Allow {
		d.Reason = reason.PolicyAllow
	}
	if err != nil {
		id := r.DecisionID
		if id == "" {
			// Failed evaluations are logged and audited too: give them an
			// id to correlate the 503 or fail-open answer with.
			id = policy.NewDecisionID()
		}
		d = Decision{Reason: reason.PolicyError, DenyReasons: []string{}, DecisionID: id, Revision: set.Revision()}
		err = reason.Wrap(reason.PolicyError, err, "policy evaluation failed")
	}
	if d.DenyReasons == nil {
		d.DenyReasons = []string{}
	}
	// The input goes on the span only for a live watcher (trace tail's
	// variable inspector), never to an exporter on its own.
	withInput := span.IsRecording() && e.observer != nil && e.observer.Observing()
	if withInput && rc != nil {
		rc.CompleteRequest(in.Request)
	}
	e.tel.endEval(ctx, span, in, d, err, withInput)
	return d, err
}

func (e *Engine) record(ctx context.Context, start time.Time, res Result, req *Request) error {
	return e.finish(ctx, start, res, req, false, false)
}

func (e *Engine) recordEvaluated(ctx context.Context, start time.Time, res Result, req *Request, simulated bool) error {
	return e.finish(ctx, start, res, req, true, simulated)
}

// finish counts the decision, writes its audit record, appends it to the
// decision log and shows it to the observer. With simulated set (dry-run
// policy mode), the record carries the policy's own outcome, which was
// not enforced. The error is the decision log's refusal
// (decision-log-unavailable): the decision must not be answered.
func (e *Engine) finish(ctx context.Context, start time.Time, res Result, req *Request, evaluated, simulated bool) error {
	latency := e.now().Sub(start)
	logErr := e.writeRecords(ctx, start, latency, res, req, evaluated, simulated)
	if req.Scope == ScopeToken {
		// Token validations are counted by the verification metrics.
		return logErr
	}
	// Counted as what the caller saw.
	allowed, code := res.Allowed(), res.Decision.Reason
	switch {
	case logErr != nil:
		// Refused by the decision log, whatever was decided.
		allowed, code = false, reason.DecisionLogUnavailable
	case simulated && !res.Decision.Allow:
		// Let through.
		allowed, code = true, reason.PolicyDryRun
	}
	e.tel.decided(ctx, code, allowed, latency)
	return logErr
}

// writeRecords writes the decision's audit record, appends it to the decision
// log and shows it to the observer; the error is the decision log's
// refusal.
func (e *Engine) writeRecords(ctx context.Context, start time.Time, latency time.Duration, res Result, req *Request, evaluated, simulated bool) error {
	in := &req.Input
	observing := e.observer != nil && e.observer.Observing()
	if e.audit == nil && !observing && e.decisions == nil {
		return nil
	}
	rec := audit.Record{
		Time:           start.UTC(),
		DecisionID:     res.Decision.DecisionID,
		Tenant:         res.Token.TenantID,
		UserID:         res.Token.Subject,
		Action:         in.Action,
		Resource:       audit.Resource{Type: in.Resource.Type, ID: in.Resource.ID, Tenant: in.Resource.Tenant, Attributes: in.Resource.Attributes},
		Allow:          res.Allowed(),
		DenyReasons:    res.Decision.DenyReasons,
		Reason:         string(res.Decision.Reason),
		PolicyRevision: res.Decision.Revision,
		LatencyUS:      latency.Microseconds(),
		Simulated:      simulated,
		Source:         req.Source,
		IdentityKind:   res.Token.Kind,
		Plan:           string(res.Plan.Kind),
	}
	lg, isLogger := e.audit.(*audit.Logger)
	if !observing && (isLogger || e.audit == nil) {
		// The audit log and the decision record write the ids from their
		// bytes; only an observer or another sink reads the strings.
		sc := trace.SpanContextFromContext(ctx)
		var logErr error
		if e.decisions != nil {
			logErr = e.logDecision(&rec, in, e.recordSource(req), sc)
		}
		if !isLogger {
			return logErr
		}
		if sc.IsValid() {
			lg.LogTraced(rec, sc.TraceID(), sc.SpanID())
		} else {
			lg.Log(rec)
		}
		return logErr
	}
	rec.TraceID, rec.SpanID = traceIDs(ctx)
	var logErr error
	if e.decisions != nil {
		logErr = e.logDecision(&rec, in, e.recordSource(req), trace.SpanContext{})
	}
	if e.audit != nil {
		e.audit.Log(rec)
	}
	if observing {
		if req.Completer != nil {
			req.Completer.CompleteRequest(in.Request)
		}
		e.observer.ObserveDecision(ctx, DecisionEvent{
			Record: e.maskedRecord(rec), Input: *in, Evaluated: evaluated,
			PolicyAllow: evaluated && res.Decision.Allow, Latency: latency,
		})
	}
	return logErr
}

// registered are the claims that map to fixed input fields; the rest are
// the user's custom claims (input.user.claims).
var registered = map[string]bool{
	"iss": true, "sub": true, "aud": true, "exp": true, "nbf": true, "iat": true, "jti": true,
	"tenant_id": true, "role": true, "roles": true, "email": true,
}

func userFrom(d TokenDecision) policy.User {
	u := policy.User{ID: d.Subject, TenantID: d.TenantID, Roles: []string{}, Claims: noClaims}
	if d.Claims == nil {
		return u
	}
	if roles, ok := d.Claims["roles"].([]any); ok {
		for _, r := range roles {
			if s, ok := r.(string); ok && s != "" {
				u.Roles = append(u.Roles, s)
			}
		}
	}
	if role, ok := d.Claims["role"].(string); ok && role != "" {
		u.Role = role
		if len(u.Roles) == 0 {
			u.Roles = append(u.Roles, role)
		}
	} else if len(u.Roles) > 0 {
		u.Role = u.Roles[0]
	}
	u.Email, _ = d.Claims["email"].(string)
	custom := 0
	for k := range d.Claims {
		if !registered[k] {
			custom++
		}
	}
	if custom == 0 {
		// Most tokens carry registered claims only: they share one empty
		// map, which saves every cached token's user a map.
		u.Claims = noClaims
		return u
	}
	u.Claims = make(map[string]any, custom)
	for k, v := range d.Claims {
		if !registered[k] {
			u.Claims[k] = v
		}
	}
	return u
}

// noClaims is the custom claims of a user who has none. It is shared and,
// like every user's claims, never modified.
var noClaims = map[string]any{}
