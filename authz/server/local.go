package server

import (
	"context"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/signincookie"
	"github.com/svc-dev/svc/reason"
)

// LocalAuthorizer is an authz.Authorizer that decides in-process, on an engine
// the application embeds, with the same results as a Client talking to a
// sidecar. It is safe for concurrent use.
type LocalAuthorizer struct {
	d        Decider
	failMode string
	cookie   string
	// prefixedOnly: only "__Host-" + cookie counts (SessionCookiePrefixedOnly).
	prefixedOnly bool
}

var _ authz.Authorizer = (*LocalAuthorizer)(nil)

// Local returns an authz.Authorizer deciding in-process on d, usually an
// *engine.Engine. Its fail mode, applied when the engine cannot decide, is
// the engine's configured sdk.fail_mode when d reports its configuration
// (as *engine.Engine does), authz.FailOpen otherwise; its session cookie,
// sdk.session.cookie_name when that configuration has a sign-in gateway
// ([sdk.saml] or [sdk.oidc]), read only prefixed where every gateway's
// cookies are (signincookie.PrefixedOnly, as the sidecar's checks).
func Local(d Decider) *LocalAuthorizer {
	l := &LocalAuthorizer{d: d, failMode: authz.FailOpen}
	if c, ok := d.(interface{ Config() config.Config }); ok {
		cfg := c.Config()
		if cfg.SDK.FailMode == config.FailClosed {
			l.failMode = authz.FailClosed
		}
		if cfg.SignIn() {
			l.cookie = cfg.SDK.Session.CookieName
			if l.cookie == "" {
				l.cookie = config.DefaultSAMLCookieName
			}
			l.prefixedOnly = signincookie.PrefixedOnly(cfg)
		}
	}
	return l
}

// SessionCookie returns the engine's sdk.session.cookie_name, or "" when
// it has no sign-in gateway ([sdk.saml] or [sdk.oidc]); the authz
// middleware reads the session token from it.
func (l *LocalAuthorizer) SessionCookie() string { return l.cookie }

// SessionCookiePrefixedOnly reports whether every sign-in gateway of the
// engine's configuration prefixes its cookies (its acs_url or
// redirect_url is not plain http on a loopback host), so that only
// "__Host-" + SessionCookie() counts.
func (l *LocalAuthorizer) SessionCookiePrefixedOnly() bool { return l.prefixedOnly }

// FailMode returns authz.FailOpen or authz.FailClosed.
func (l *LocalAuthorizer) FailMode() string { return l.failMode }

// ValidateToken verifies token in-process. It never fails; the claims are
// a copy the caller may modify.
func (l *LocalAuthorizer) ValidateToken(ctx context.Context, token string) (authz.TokenDecision, error) {
	return tokenDecisionOf(validate(ctx, l.d, sourceSDK, engine.CredentialOf(token)), true), nil
}

// Authorize decides req in-process. A malformed request is a *reason.Error
// with code reason.InputInvalid. When the engine cannot decide it returns
// an *authz.UnavailableError with reason "policy-error", in both fail modes: fail
// open applies only to a sidecar that cannot be reached.
func (l *LocalAuthorizer) Authorize(ctx context.Context, req authz.AuthorizeRequest) (authz.Decision, error) {
	in, err := inputOf(req)
	if err != nil {
		return authz.Decision{Reason: reason.InputInvalid, DenyReasons: []string{}}, err
	}
	res, err := l.d.Decide(ctx, engine.Request{Credential: engine.CredentialOf(req.Token), Input: in, Source: sourceSDK})
	if err != nil {
		// In-process there is no sidecar to be unreachable: an engine that
		// cannot decide is a denial whatever the fail mode.
		rc := reason.Of(err, reason.PolicyError)
		return authz.Decision{Reason: rc, DenyReasons: []string{}}, &authz.UnavailableError{Op: "authorize", Reason: rc, Err: err}
	}
	return decisionOf(res, true), nil
}
