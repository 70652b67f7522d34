package oidcgw

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/refusalpage"
	"github.com/svc-dev/svc/internal/signinmux"
	"github.com/svc-dev/svc/reason"
)

// Paths below the prefix.
const (
	PathLogin             = "/login"
	PathCallback          = "/callback"
	PathLogout            = "/logout"
	PathBackchannelLogout = "/backchannel-logout"
)

// maxFormBytes caps a back-channel logout post.
const maxFormBytes = 64 << 10

// Handler serves the endpoints under the configured path prefix.
func (g *Gateway) Handler() http.Handler {
	p := g.cfg.PathPrefix
	// Unknown paths and methods alike are not found.
	notFound := func(w http.ResponseWriter, r *http.Request, _ string) {
		g.writeRefusal(w, r, refuse(reason.OIDCNotFound, "no OpenID Connect endpoint for %s %s; the endpoints are %s/login, /callback, /logout and /backchannel-logout",
			r.Method, r.URL.Path, p))
	}
	return signinmux.Handler(p, notFound,
		signinmux.Route{Method: http.MethodGet, Path: PathLogin, Serve: g.serveLogin},
		signinmux.Route{Method: http.MethodGet, Path: PathCallback, Serve: g.serveCallback},
		signinmux.Route{Method: http.MethodGet, Path: PathLogout, Serve: g.serveLogout},
		signinmux.Route{Method: http.MethodPost, Path: PathLogout, Serve: g.serveLogout},
		signinmux.Route{Method: http.MethodPost, Path: PathBackchannelLogout, Serve: g.serveBackchannelLogout},
	)
}

// serveLogin starts a sign-in: the authorization request of the code
// flow with PKCE (S256), a state bound to this browser and a nonce. With
// several providers for the request (?tenant= narrows them, ?provider=
// names one) it answers the page that offers them, and SAML when it is
// configured.
func (g *Gateway) serveLogin(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	returnTo, ok := config.ReturnToPath(q.Get("return_to"))
	if !ok {
		g.writeRefusal(w, r, refuse(reason.OIDCBadReturnTo, "return_to must be a relative path on this site, such as /app"))
		return
	}
	if returnTo == "" {
		returnTo = g.session.DefaultReturnTo
	}
	if _, err := r.Cookie(g.refreshCookieName()); err == nil {
		session, exp, ok, err := g.refresh(r.Context(), r)
		if ok && err == nil {
			g.jar.SetSession(w, session, exp)
			w.Header().Set("Cache-Control", "no-store")
			http.Redirect(w, r, returnTo, http.StatusSeeOther)
			return
		}
		if err != nil {
			args := []any{"reason", string(CodeOf(err))}
			if e := errors.Unwrap(err); e != nil {
				args = append(args, "err", e.Error())
			}
			g.log.Warn("OpenID Connect session refresh failed; signing in again", args...)
		}
		// Nothing to refresh, or the provider refused: the session ends
		// and the browser signs in again.
		g.endRefresh(w)
	}
	p, choices := g.pick(q.Get("provider"), q.Get("tenant"))
	if p == nil {
		if q.Get("provider") != "" {
			g.writeRefusal(w, r, refuse(reason.OIDCUnknownProvider, "no provider of that name is configured (for this tenant)"))
			return
		}
		g.writeChooser(w, choices, returnTo)
		return
	}
	op, err := p.discover(r.Context())
	if err != nil {
		g.log.Warn("OpenID provider discovery failed", "provider", p.cfg.Name, "err", err)
		g.writeRefusal(w, r, reason.Wrap(reason.OIDCProviderUnavailable, err, "the identity provider's discovery document could not be read"))
		return
	}
	state, pend := randomToken(), newPending(p.cfg.Name, returnTo, g.now().Add(StateTTL))
	sealed, err := g.sealer.seal(r.Context(), state, pend)
	if err != nil {
		g.log.Error("pending sign-in could not be sealed", "err", err)
		g.writeRefusal(w, r, reason.Wrap(reason.OIDCStoreUnavailable, err, "the sign-in could not be started"))
		return
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(pend.verifier()), oidc.Nonce(pend.nonce())}
	if slices.Contains(p.cfg.Scopes, oidc.ScopeOfflineAccess) {
		// OpenID Connect Core 11: offline access is asked with consent;
		// providers that keep to it (oidc-provider among them) drop
		// offline_access otherwise, and issue no refresh token.
		opts = append(opts, oauth2.SetAuthURLParam("prompt", "consent"))
	}
	to := p.oauth2(op).AuthCodeURL(state, opts...)
	g.bindState(w, r, state, sealed)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, to, http.StatusFound)
}

// pick chooses the provider of a login: the one named, else the only one
// for the tenant (every provider without a tenant) when SAML is not also
// on offer; nil and the providers to offer otherwise.
func (g *Gateway) pick(name, tenant string) (*provider, []*provider) {
	if name != "" {
		// ?tenant= only narrows: a provider of another tenant is not
		// picked for it (its sessions are its own tenant's regardless).
		p := g.byName(name)
		if p != nil && tenant != "" && p.cfg.Tenant != "" && p.cfg.Tenant != tenant {
			return nil, nil
		}
		return p, nil
	}
	var choices []*provider
	for _, p := range g.providers {
		if tenant == "" || p.cfg.Tenant == "" || p.cfg.Tenant == tenant {
			choices = append(choices, p)
		}
	}
	if len(choices) == 1 && g.samlLogin == "" {
		return choices[0], nil
	}
	return nil, choices
}

func (g *Gateway) byName(name string) *provider {
	for _, p := range g.providers {
		if p.cfg.Name == name {
			return p
		}
	}
	return nil
}

// serveCallback completes a sign-in: the provider's answer is checked,
// the code exchanged, the ID token verified, and the browser gets the
// session cookie and goes back to its page.
func (g *Gateway) serveCallback(w http.ResponseWriter, r *http.Request) {
	p, claims, returnTo, tok, err := g.complete(w, r)
	if err == nil {
		// The sign-in's own id, which the refresh keeps with the claims
		// and every renewal mints again: a logout ends every token of it.
		claims[SessionIDClaim] = randomToken()
		token, exp, ierr := g.issuer.Issue(claims)
		if ierr == nil {
			ierr = g.keepRefresh(r.Context(), w, p, tok, claims)
		}
		if ierr != nil {
			err = reason.Wrap(reason.OIDCInternal, ierr, "the session could not be issued")
		} else {
			g.log.Info("OpenID Connect sign-in", "provider", p, "tenant", claims["tenant_id"])
			g.jar.SetSession(w, token, exp)
			w.Header().Set("Cache-Control", "no-store")
			http.Redirect(w, r, returnTo, http.StatusSeeOther)
			return
		}
	}
	args := []any{"reason", string(CodeOf(err)), "provider", p}
	if e := errors.Unwrap(err); e != nil {
		args = append(args, "err", e.Error())
	}
	g.log.Warn("OpenID Connect sign-in refused", args...)
	g.writeRefusal(w, r, err)
}

// complete checks a callback and returns the provider's name, the
// session's claims and where to send the browser.
func (g *Gateway) complete(w http.ResponseWriter, r *http.Request) (string, map[string]any, string, *oauth2.Token, error) {
	q := r.URL.Query()
	state := q.Get("state")
	// Checked before anything else: a forged callback spends nothing of
	// the victim's pending sign-in.
	states := g.boundStates(r)
	i := boundIndex(states, state)
	if !validState(state) || i < 0 {
		return "", nil, "", nil, refuse(reason.OIDCStateNotBound, "this browser did not start the sign-in this callback answers (no %s cookie listing its state); start again at %s",
			g.stateCookieName(), g.loginURL(""))
	}
	g.unbindState(w, r, state)
	pend, err := g.openPending(r.Context(), state, states[i].sealed)
	if err != nil {
		return "", nil, "", nil, err
	}
	p := g.byName(pend.Provider)
	if p == nil {
		return pend.Provider, nil, "", nil, refuse(reason.OIDCUnknownProvider, "the sign-in's provider is no longer configured")
	}
	op, err := p.discover(r.Context())
	if err != nil {
		return p.cfg.Name, nil, "", nil, reason.Wrap(reason.OIDCProviderUnavailable, err, "the identity provider's discovery document could not be read")
	}
	// Before anything of the answer is used, the code least of all.
	if err := p.checkResponseIssuer(q.Get("iss"), q.Has("iss")); err != nil {
		return p.cfg.Name, nil, "", nil, err
	}
	if e := q.Get("error"); e != "" {
		return p.cfg.Name, nil, "", nil, refuse(reason.OIDCProviderError, "the identity provider answered %q", safeToken(e))
	}
	tok, err := p.oauth2(op).Exchange(oidc.ClientContext(r.Context(), p.tokenClient), q.Get("code"), oauth2.VerifierOption(pend.verifier()))
	if status, ok := redirected(err); ok {
		return p.cfg.Name, nil, "", nil, refuse(reason.OIDCProviderUnavailable, "the identity provider's token endpoint answered %d, a redirect, which is not followed", status)
	}
	if err != nil {
		return p.cfg.Name, nil, "", nil, reason.Wrap(reason.OIDCCodeRefused, tokenError(err), "the identity provider refused the authorization code")
	}
	ctx := oidc.ClientContext(r.Context(), p.client)
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return p.cfg.Name, nil, "", nil, refuse(reason.OIDCIDTokenInvalid, "the identity provider sent no ID token")
	}
	idt, err := p.verifier().Verify(ctx, raw)
	if err != nil {
		return p.cfg.Name, nil, "", nil, verifyError(err)
	}
	if err := p.checkAuthorizedParty(idt); err != nil {
		return p.cfg.Name, nil, "", nil, err
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(pend.nonce())) != 1 {
		return p.cfg.Name, nil, "", nil, refuse(reason.OIDCNonceMismatch, "the ID token's nonce is not this sign-in's")
	}
	claims, err := g.sessionClaims(p, idt)
	if err != nil {
		return p.cfg.Name, nil, "", nil, err
	}
	if err := g.useState(r.Context(), state, pend.Expires); err != nil {
		return p.cfg.Name, nil, "", nil, err
	}
	return p.cfg.Name, claims, pend.ReturnTo, tok, nil
}

// checkAuthorizedParty keeps to OpenID Connect Core 3.1.3.7, which the
// verifier leaves to its caller: an ID token of several audiences must
// name this client as its authorized party (azp), and an azp, when
// there is one, must be this client. Otherwise the token was issued to
// another client, beside which this one merely appears in aud.
func (p *provider) checkAuthorizedParty(idt *oidc.IDToken) error {
	var c struct {
		AZP *string `json:"azp"`
	}
	if err := idt.Claims(&c); err != nil {
		return reason.Wrap(reason.OIDCIDTokenInvalid, err, "the ID token's claims cannot be read")
	}
	switch {
	case c.AZP != nil && *c.AZP != p.cfg.ClientID:
		return refuse(reason.OIDCAudienceMismatch, "the ID token was issued to another client (azp)")
	case c.AZP == nil && len(idt.Audience) > 1:
		return refuse(reason.OIDCAudienceMismatch, "the ID token has several audiences and names no authorized party (azp)")
	}
	return nil
}

// verifyError maps a failed ID token verification to its code.
func verifyError(err error) *reason.Error {
	var exp *oidc.TokenExpiredError
	switch {
	case errors.As(err, &exp):
		return reason.Wrap(reason.OIDCIDTokenInvalid, err, "the ID token has expired")
	case strings.Contains(err.Error(), "expected audience"):
		return reason.Wrap(reason.OIDCAudienceMismatch, err, "the ID token is for another client")
	}
	return reason.Wrap(reason.OIDCIDTokenInvalid, err, "the ID token does not verify")
}

// tokenError keeps of a token endpoint error what is safe to log: the
// OAuth error code, never the response body.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return errors.New("token endpoint: " + safeToken(re.ErrorCode))
	}
	return err
}

// redirected reports whether err is the token endpoint's answer of a
// redirect, which the token client does not follow, and its status.
func redirected(err error) (int, bool) {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 300 && re.Response.StatusCode < 400 {
		return re.Response.StatusCode, true
	}
	return 0, false
}

// safeToken keeps an OAuth error code printable and short.
func safeToken(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' {
			return r
		}
		return -1
	}, s)
	return s[:min(len(s), 64)]
}

// sessionClaims are the claims of the session an ID token opens: sub,
// tenant_id, email, roles (as SAML's), and the provider (idp) with the
// provider's session id (idp_sid) and the moment of this sign-in
// (auth_time, kept by every refresh of the session) for back-channel
// logout.
func (g *Gateway) sessionClaims(p *provider, idt *oidc.IDToken) (map[string]any, error) {
	if idt.Subject == "" {
		// Required (OpenID Connect Core 2): the session's user, by which
		// the checks, the policies and a back-channel logout know it.
		return nil, refuse(reason.OIDCIDTokenInvalid, "the ID token names no subject (sub)")
	}
	var c map[string]any
	if err := idt.Claims(&c); err != nil {
		return nil, reason.Wrap(reason.OIDCIDTokenInvalid, err, "the ID token's claims cannot be read")
	}
	m := p.cfg.ClaimMapping
	tenant, _ := c[m.Tenant].(string)
	switch {
	case p.cfg.Tenant != "" && tenant != "" && tenant != p.cfg.Tenant:
		return nil, refuse(reason.OIDCTenantMissing, "the ID token names another tenant than its provider's")
	case p.cfg.Tenant != "":
		tenant = p.cfg.Tenant
	case tenant == "":
		tenant = g.tenant
	}
	if tenant == "" {
		return nil, refuse(reason.OIDCTenantMissing, "the ID token has no %s claim", m.Tenant)
	}
	out := map[string]any{"sub": idt.Subject, "tenant_id": tenant, "roles": stringList(c[m.Roles]), "idp": p.cfg.Name,
		"auth_time": g.now().Unix()}
	if e, ok := c[m.Email].(string); ok && e != "" {
		out["email"] = e
	}
	if sid, ok := c["sid"].(string); ok && sid != "" {
		out["idp_sid"] = sid
	}
	return out, nil
}

// stringList reads a claim that is a string or a list of strings.
func stringList(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return []string{}
}

// serveLogout ends the session: its token is revoked (endSession), the
// cookie goes, and the browser goes to the provider's
// end_session_endpoint when it has one (RP-initiated logout: with
// ?provider= or when there is one provider), else to return_to
// (default_return_to). A JSON client gets 204.
func (g *Gateway) serveLogout(w http.ResponseWriter, r *http.Request) {
	g.endSession(r)
	g.jar.ClearSession(w)
	if c, err := r.Cookie(g.refreshCookieName()); err == nil {
		// The refresh token goes with the session.
		_, _ = g.store.Take(r.Context(), refreshKey("state", c.Value))
		g.endRefresh(w)
	}
	w.Header().Set("Cache-Control", "no-store")
	if refusalpage.WantsJSON(r.Header.Get("Accept")) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	to, ok := config.ReturnToPath(r.URL.Query().Get("return_to"))
	if !ok || to == "" {
		to = g.session.DefaultReturnTo
	}
	p := g.byName(r.URL.Query().Get("provider"))
	if p == nil && len(g.providers) == 1 {
		p = g.providers[0]
	}
	if p != nil {
		if end := p.endSessionURL(r.Context()); end != "" {
			to = end
		}
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// endSessionURL is the provider's end_session_endpoint with client_id;
// "" when it has none or its discovery cannot be read.
func (p *provider) endSessionURL(ctx context.Context) string {
	if _, err := p.discover(ctx); err != nil {
		return ""
	}
	p.mu.Lock()
	end := p.endSession
	p.mu.Unlock()
	if end == "" {
		return ""
	}
	sep := "?"
	if strings.Contains(end, "?") {
		sep = "&"
	}
	return end + sep + "client_id=" + url.QueryEscape(p.cfg.ClientID)
}
