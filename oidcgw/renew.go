package oidcgw

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/svc-dev/svc/reason"
)

// Renewal before expiry: the checks ask RenewSession about a valid
// session within sdk.session.refresh_before of its expiry. The first
// request of the session, on any replica, takes the refresh lock and
// refreshes; the others of the moment go on with the still-valid session,
// without waiting, and pick up the renewed session the refresh leaves in
// the store. What the store holds under "done" for a handle says how the
// last refresh ended: a new session (delivered to every request of the
// old one), a refusal (the session ends), or a provider that could not
// be reached (no new attempt for renewBackoff).

// RenewWait is how long the check that refreshes waits for the provider
// before it answers without the new session (Envoy's ext_authz timeout
// in the shipped configuration is 0.5 s). The refresh goes on, and the
// next request of the session gets its result.
const RenewWait = 250 * time.Millisecond

// renewBackoff is how long no refresh is tried after the provider could
// not be reached.
const renewBackoff = 5 * time.Second

// renewTimeout bounds a refresh; it is shorter than RefreshLockTTL, so
// the lock always outlives it.
const renewTimeout = 20 * time.Second

// errNothingToRenew: the store holds no refresh token for the handle.
var errNothingToRenew = errors.New("no refresh token for this handle")

// renewed is how the last refresh of a handle ended.
type renewed struct {
	T string    `json:"t,omitempty"` // the new session token
	E time.Time `json:"e"`           // its expiry
	// Failed: the provider refused the refresh token; the session ends.
	Failed bool `json:"f,omitempty"`
	// Retry: the provider could not be reached; no refresh is tried
	// until the record expires.
	Retry bool `json:"r,omitempty"`
}

// RenewSession is asked by the checks about a valid session token within
// its refresh window: cookies is the request's Cookie header, claims the
// verified token's. It returns the Set-Cookie value that delivers the
// renewed session, "" when there is none (yet), or the one that clears
// the session, whose provider refused to refresh it. The request asking
// was decided while its session was valid and keeps its answer; the
// session is then revoked as a logout at the gateway would (its session
// id: every token of the sign-in, renewed away or not), so that its
// later requests, on every replica, are refused (oidc-session-revoked)
// where they are decided and audited. Only that sign-in: a new one,
// even within the same provider session, is not.
//
// A session without a refresh cookie costs nothing; one with costs a
// store read, and the request that takes the lock waits at most
// RenewWait for the provider.
func (g *Gateway) RenewSession(ctx context.Context, cookies string, claims map[string]any) (setCookie string) {
	handle := cookieIn(cookies, g.refreshCookieName())
	if !validState(handle) {
		return ""
	}
	exp, ok := expiryOf(claims)
	if !ok {
		return ""
	}
	d, err := g.lastRenewal(ctx, handle)
	if err != nil {
		return ""
	}
	if c, end, settled := g.deliver(d, exp); settled {
		g.ended(ctx, end, claims)
		return c
	}
	mine, err := g.store.Lock(ctx, refreshKey("lock", handle), RefreshLockTTL)
	if err != nil || !mine {
		return ""
	}
	// A refresh may have ended between the read and the lock: read again,
	// holding the lock, so that it is not done twice.
	d, err = g.lastRenewal(ctx, handle)
	if c, end, settled := g.deliver(d, exp); err != nil || settled {
		_, _ = g.store.Take(context.WithoutCancel(ctx), refreshKey("lock", handle))
		g.ended(ctx, end, claims)
		return c
	}
	out := make(chan renewed, 1)
	go func() { out <- g.renewLocked(context.WithoutCancel(ctx), handle, exp) }()
	t := time.NewTimer(RenewWait)
	defer t.Stop()
	select {
	case d := <-out:
		c, end, _ := g.deliver(d, exp)
		g.ended(ctx, end, claims)
		return c
	case <-t.C:
	case <-ctx.Done():
	}
	return ""
}

// ended ends, when end, the session of the token with claims, whose
// refresh the provider refused (revokeSession).
func (g *Gateway) ended(ctx context.Context, end bool, claims map[string]any) {
	if !end {
		return
	}
	if _, err := g.revokeSession(context.WithoutCancel(ctx), claims); err != nil {
		g.log.Warn("OpenID Connect session whose refresh was refused could not be revoked", "reason", string(reason.Of(err, reason.OIDCStoreUnavailable)))
	}
}

// deliver is what a request of the session that expires at exp gets of
// the last refresh d; settled is false when d calls for a refresh.
func (g *Gateway) deliver(d renewed, exp time.Time) (setCookie string, end, settled bool) {
	switch {
	case d.T != "" && d.E.After(exp) && g.now().Before(d.E):
		return g.jar.SessionCookie(d.T, d.E).String(), false, true
	case d.Failed:
		return g.jar.Cleared(g.jar.SessionName(), "/", http.SameSiteLaxMode).String(), true, true
	case d.Retry:
		return "", false, true
	}
	return "", false, false
}

// lastRenewal reads how the last refresh of handle ended; the zero
// renewed when none is on record.
func (g *Gateway) lastRenewal(ctx context.Context, handle string) (renewed, error) {
	var d renewed
	raw, err := g.store.Get(ctx, refreshKey("done", handle))
	if err != nil || raw == nil {
		return d, err
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return renewed{}, nil
	}
	return d, nil
}

// renewLocked refreshes the session of handle, which expires at exp,
// holding the refresh lock, and records the outcome for the session's
// other requests. It releases the lock when done.
func (g *Gateway) renewLocked(ctx context.Context, handle string, exp time.Time) renewed {
	defer func() { _, _ = g.store.Take(context.WithoutCancel(ctx), refreshKey("lock", handle)) }()
	ctx, cancel := context.WithTimeout(ctx, renewTimeout)
	defer cancel()
	d, err := g.renewState(ctx, handle)
	ttl := refreshed
	switch {
	case err == nil:
		ttl = max(ttl, exp.Sub(g.now())) // every request of the old session gets the new one
		g.log.Info("OpenID Connect session refreshed before expiry")
	case errors.Is(err, errNothingToRenew):
		// Not this sidecar's handle (or one whose session ended):
		// nothing to renew for as long as the session lasts.
		d = renewed{Retry: true}
		ttl = max(time.Second, exp.Sub(g.now()))
	case reason.Of(err, "") == reason.OIDCRefreshFailed:
		d = renewed{Failed: true}
		ttl = max(time.Second, exp.Sub(g.now())) // until the old session would have expired
		_, _ = g.store.Take(ctx, refreshKey("state", handle))
		g.logRefreshError("OpenID Connect session refresh refused; the session ends", err)
	default:
		d = renewed{Retry: true}
		ttl = renewBackoff
		g.logRefreshError("OpenID Connect session refresh failed; tried again later", err)
	}
	if b, merr := json.Marshal(d); merr == nil {
		_ = g.store.Put(ctx, refreshKey("done", handle), b, ttl)
	}
	return d
}

// renewState refreshes the session kept under handle and keeps the
// (possibly rotated) refresh token. An error with reason
// OIDCRefreshFailed ends the session; any other leaves it to a later
// attempt.
func (g *Gateway) renewState(ctx context.Context, handle string) (renewed, error) {
	raw, err := g.store.Get(ctx, refreshKey("state", handle))
	if err != nil {
		return renewed{}, reason.Wrap(reason.OIDCStoreUnavailable, err, "the refresh token could not be read")
	}
	if raw == nil {
		return renewed{}, errNothingToRenew
	}
	var st refreshState
	if err := json.Unmarshal(raw, &st); err != nil {
		return renewed{}, reason.Wrap(reason.OIDCRefreshFailed, err, "the refresh token record cannot be read")
	}
	if err := g.redeem(ctx, handle, &st); err != nil {
		return renewed{}, err
	}
	b, err := json.Marshal(st)
	if err != nil {
		return renewed{}, reason.Wrap(reason.OIDCInternal, err, "the refresh token could not be kept")
	}
	if err := g.store.Put(ctx, refreshKey("state", handle), b, refreshTTL); err != nil {
		return renewed{}, reason.Wrap(reason.OIDCStoreUnavailable, err, "the refresh token could not be kept")
	}
	session, sexp, err := g.issuer.Issue(st.Claims)
	if err != nil {
		return renewed{}, reason.Wrap(reason.OIDCInternal, err, "the session could not be issued")
	}
	return renewed{T: session, E: sexp}, nil
}

// redeem spends st's refresh token at its provider and seals the one to
// use next (the provider's rotated token, else the same) into st. A
// refusal of the provider has reason OIDCRefreshFailed; a provider that
// cannot be reached, OIDCProviderUnavailable.
func (g *Gateway) redeem(ctx context.Context, handle string, st *refreshState) error {
	p := g.byName(st.Provider)
	rt, uerr := unseal(handle, st.Sealed)
	if p == nil || uerr != nil {
		return reason.New(reason.OIDCRefreshFailed, "the session cannot be refreshed")
	}
	// A session the provider ended (back-channel logout) stays ended,
	// though a provider may keep an offline refresh token valid past the
	// logout: its refreshed session would be refused by every check, which
	// sends the browser back to the login, to refresh again.
	ended, err := g.Revoked(ctx, st.Claims)
	if err != nil {
		return reason.Wrap(reason.OIDCStoreUnavailable, err, "the session's logout could not be looked up")
	}
	if ended {
		return reason.New(reason.OIDCRefreshFailed, "the identity provider ended the session (back-channel logout)")
	}
	op, err := p.discover(ctx)
	if err != nil {
		return reason.Wrap(reason.OIDCProviderUnavailable, err, "the identity provider's discovery document could not be read")
	}
	tok, err := p.oauth2(op).TokenSource(oidc.ClientContext(ctx, p.tokenClient), &oauth2.Token{RefreshToken: rt, Expiry: time.Unix(1, 0)}).Token()
	if status, ok := redirected(err); ok {
		// Not a refusal of the refresh token: the endpoint is misplaced.
		return reason.New(reason.OIDCProviderUnavailable, "the identity provider's token endpoint answered %d, a redirect, which is not followed", status)
	}
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < http.StatusInternalServerError {
			return reason.Wrap(reason.OIDCRefreshFailed, tokenError(err), "the identity provider refused to refresh the session")
		}
		return reason.Wrap(reason.OIDCProviderUnavailable, tokenError(err), "the identity provider could not refresh the session")
	}
	if tok.RefreshToken != "" {
		rt = tok.RefreshToken // a rotated refresh token
	}
	sealed, err := seal(handle, rt)
	if err != nil {
		return reason.Wrap(reason.OIDCInternal, err, "the refresh token could not be sealed")
	}
	st.Sealed = sealed
	return nil
}

func (g *Gateway) logRefreshError(msg string, err error) {
	args := []any{"reason", string(CodeOf(err))}
	if e := errors.Unwrap(err); e != nil {
		args = append(args, "err", e.Error())
	}
	g.log.Warn(msg, args...)
}

// expiryOf reads a verified token's exp claim.
func expiryOf(claims map[string]any) (time.Time, bool) {
	n, ok := numericClaim(claims, "exp")
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// numericClaim reads a verified token's NumericDate claim name (a
// json.Number, or a number from a token issued in this process), in
// whole seconds.
func numericClaim(claims map[string]any, name string) (int64, bool) {
	switch v := claims[name].(type) {
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n, true
		}
	case int64:
		return v, true
	case float64:
		return int64(v), true
	}
	return 0, false
}

// cookieIn is the value of the cookie name in a Cookie header (several
// joined with "; " or ","), "" when it is not there.
func cookieIn(header, name string) string {
	for header != "" {
		var part string
		part, header, _ = strings.Cut(header, ";")
		for _, kv := range strings.Split(part, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if ok && k == name {
				return strings.Trim(v, `"`)
			}
		}
	}
	return ""
}
