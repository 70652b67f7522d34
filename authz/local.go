package authz

import (
	"context"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/reason"
)

// LocalAuthorizer is an Authorizer that decides in-process, on an engine
// the application embeds, with the same results as a Client talking to a
// sidecar. It is safe for concurrent use.
type LocalAuthorizer struct {
	d        Decider
	failMode string
}

var _ Authorizer = (*LocalAuthorizer)(nil)

// Local returns an Authorizer deciding in-process on d, usually an
// *engine.Engine. Its fail mode, applied when the engine cannot decide, is
// the engine's configured sdk.fail_mode when d reports its configuration
// (as *engine.Engine does), FailOpen otherwise.
func Local(d Decider) *LocalAuthorizer {
	mode := FailOpen
	if c, ok := d.(interface{ Config() config.Config }); ok && c.Config().SDK.FailMode == FailClosed {
		mode = FailClosed
	}
	return &LocalAuthorizer{d: d, failMode: mode}
}

// FailMode returns FailOpen or FailClosed.
func (l *LocalAuthorizer) FailMode() string { return l.failMode }

// ValidateToken verifies token in-process. It never fails; the claims are
// a copy the caller may modify.
func (l *LocalAuthorizer) ValidateToken(ctx context.Context, token string) (TokenDecision, error) {
	d := l.d.ValidateToken(engine.WithSource(ctx, "sdk"), token)
	d.Claims = cloneClaims(d.Claims)
	return d, nil
}

// Authorize decides req in-process. A malformed request is a *reason.Error
// with code reason.InputInvalid. When the engine cannot decide it returns
// an *UnavailableError with reason "policy-error", in both fail modes: fail
// open applies only to a sidecar that cannot be reached.
func (l *LocalAuthorizer) Authorize(ctx context.Context, req AuthorizeRequest) (Decision, error) {
	in, err := inputOf(req)
	if err != nil {
		return Decision{Reason: reason.InputInvalid, DenyReasons: []string{}}, err
	}
	res, err := l.d.Authorize(engine.WithSource(ctx, "sdk"), req.Token, in)
	if err != nil {
		// In-process there is no sidecar to be unreachable: an engine that
		// cannot decide is a denial whatever the fail mode.
		rc := reason.Of(err, reason.PolicyError)
		return Decision{Reason: rc, DenyReasons: []string{}}, &UnavailableError{Op: "authorize", Reason: rc, Err: err}
	}
	return decisionOf(res, true), nil
}
