package samlgw

import (
	"github.com/svc-dev/svc/reason"
	"net/http"
	"slices"
	"strings"
	"time"
)

// A sign-on the gateway started is bound to the browser that started it
// (login CSRF): GET {prefix}/login sets the request cookie, which lists
// the ids of the browser's pending AuthnRequests, and the ACS refuses
// (saml-request-not-bound) a response to a request that the posting browser's
// cookie does not list. Without it, an attacker could start a sign-on
// with their own account, stop before posting the IdP's answer, and
// auto-post that answer from their page to the ACS from a victim's
// browser: the victim would be signed in as the attacker, and what they
// enter would land in the attacker's account. IdP-initiated responses
// (no InResponseTo) answer no request and need no cookie.
//
// The IdP's POST to the ACS is a cross-site request, which carries only a
// SameSite=None cookie, and browsers keep SameSite=None cookies only when
// they are Secure. So the request cookie is Secure even when acs_url is
// plain http on loopback, where the session cookie is not: Chromium (like
// Go's cookie jar and curl) treats http://localhost and loopback
// addresses as secure contexts and keeps Secure cookies from them; a
// browser that does not cannot complete an SP-initiated sign-on over
// plain http. (Off loopback, acs_url should be https: a browser keeps no
// Secure cookie, the session cookie included, from a plain-http site.)
//
// Off plain http on loopback the request cookie is "__Host-" prefixed
// (cookies.go), and the ACS reads no other: a sibling subdomain could
// otherwise toss an unprefixed one listing the attacker's request for the
// parent domain, and the binding would bind nothing. The prefix requires
// Path=/, so the cookie also goes with the application's requests, not
// only the gateway's. That is acceptable: it is HttpOnly (no script reads
// it), lives RequestTTL (ten minutes) at most and is cleared with the
// last pending sign-on, and lists only the ids of the browser's pending
// AuthnRequests, which already travel in the redirect to the IdP. The
// application has no use for it and, as with any cookie, should not log
// it: a pending id someone else learns is one they could try to have the
// IdP answer. On loopback it keeps Path=<path_prefix>.

// RequestCookieSuffix is appended to sdk.saml.cookie_name to name the
// request cookie ("svc_session_req" by default).
const RequestCookieSuffix = "_req"

// maxBoundRequests is how many pending sign-ons one browser keeps (several
// tabs, a login clicked twice); the oldest goes first.
const maxBoundRequests = 4

// requestCookieName is the name of the request cookie: "__Host-" prefixed
// where the gateway's cookies are Secure (cookieName).
func (g *Gateway) requestCookieName() string { return g.cookieName(g.legacyRequestCookieName()) }

// legacyRequestCookieName is the request cookie's unprefixed name, the
// only one on plain http on loopback.
func (g *Gateway) legacyRequestCookieName() string { return g.cfg.CookieName + RequestCookieSuffix }

// requestCookiePath is the request cookie's path: "/" as the prefix
// requires, else the gateway's path prefix, the only place that reads it.
func (g *Gateway) requestCookiePath() string {
	if g.secure {
		return "/"
	}
	return g.cfg.PathPrefix
}

// boundRequests returns the request ids the request cookie of r lists.
// Where the cookie is prefixed, an unprefixed one proves nothing: any
// sibling subdomain can set it.
func (g *Gateway) boundRequests(r *http.Request) []string {
	c, err := r.Cookie(g.requestCookieName())
	if err != nil || c.Value == "" {
		return nil
	}
	ids := strings.Split(c.Value, ".")
	return ids[:min(len(ids), maxBoundRequests)]
}

// bindRequest adds id to the browser's request cookie, first, keeping the
// pending ids that are still valid (the MAC of this gateway, not expired).
func (g *Gateway) bindRequest(w http.ResponseWriter, r *http.Request, id string) {
	ids := []string{id}
	for _, old := range g.boundRequests(r) {
		if len(ids) == maxBoundRequests {
			break
		}
		if _, ok, err := g.v.requests.verify(r.Context(), old, g.v.skew); ok && err == nil && !slices.Contains(ids, old) {
			ids = append(ids, old)
		}
	}
	g.setRequestCookie(w, ids)
}

// unbindRequest removes the answered id from the browser's request cookie
// (the cookie is cleared when no other sign-on is pending, and with it an
// unprefixed one from before the prefix, under the path prefix where it
// was set).
func (g *Gateway) unbindRequest(w http.ResponseWriter, r *http.Request, id string) {
	ids := slices.DeleteFunc(g.boundRequests(r), func(s string) bool { return s == id })
	g.setRequestCookie(w, ids)
	if len(ids) == 0 && g.secure {
		if _, err := r.Cookie(g.legacyRequestCookieName()); err == nil {
			g.clearCookie(w, g.legacyRequestCookieName(), g.cfg.PathPrefix, http.SameSiteNoneMode)
		}
	}
}

func (g *Gateway) setRequestCookie(w http.ResponseWriter, ids []string) {
	if len(ids) == 0 {
		g.clearCookie(w, g.requestCookieName(), g.requestCookiePath(), http.SameSiteNoneMode)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: g.requestCookieName(), Value: strings.Join(ids, "."), Path: g.requestCookiePath(),
		MaxAge: int(RequestTTL / time.Second), HttpOnly: true, Secure: true, SameSite: http.SameSiteNoneMode,
	})
}

// checkBound refuses a response to a request of this gateway that the
// posting browser did not start.
func (g *Gateway) checkBound(r *http.Request, id *Identity) error {
	if id.InResponseTo == "" || slices.Contains(g.boundRequests(r), id.InResponseTo) {
		return nil
	}
	return refuse(reason.SAMLRequestNotBound, "this browser did not start the sign-on this response answers (no %s cookie listing it); "+
		"start again at %s%s", g.requestCookieName(), g.cfg.PathPrefix, PathLogin)
}
