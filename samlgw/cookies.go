package samlgw

import (
	"net/http"
	"time"

	"github.com/svc-dev/svc/internal/signincookie"
)

// The gateway marks its cookies Secure wherever acs_url is not plain http
// on a loopback host, and there it names every cookie it sets
// "__Host-<name>" (wire.HostCookiePrefix), with Path=/ and no Domain,
// as the prefix requires. A browser refuses a cookie so named from any
// other host, so a sibling subdomain (evil.example.com next to
// app.example.com) that can set cookies for the parent domain can no
// longer toss its own session cookie in (session fixation) or its own
// request cookie (login CSRF, binding.go): the ACS reads only the
// prefixed request cookie, and the checks prefer the prefixed session
// cookie to an unprefixed one. On plain http on loopback (local
// development) the names stay unprefixed: a browser keeps no __Host-
// cookie that is not Secure, and the session cookie there is not.
//
// sdk.saml.cookie_name stays unprefixed in the configuration; the
// gateway adds the prefix, and the middlewares look for both names.

// jar sets the gateway's cookies (package signincookie).
func (g *Gateway) jar() signincookie.Jar {
	return signincookie.Jar{Secure: g.secure, Session: g.cfg.CookieName, Now: g.now}
}

// cookieName is the name the gateway gives the cookie base: base under
// wire.HostCookiePrefix when its cookies are Secure, else base.
func (g *Gateway) cookieName(base string) string { return g.jar().Name(base) }

// setSessionCookie hands the browser its token (signincookie.Jar.SetSession).
func (g *Gateway) setSessionCookie(w http.ResponseWriter, token string, exp time.Time) {
	g.jar().SetSession(w, token, exp)
}

// clearSessionCookie signs the browser out (signincookie.Jar.ClearSession).
func (g *Gateway) clearSessionCookie(w http.ResponseWriter) { g.jar().ClearSession(w) }

// clearCookie tells the browser to drop the cookie name at path, with the
// attributes it was set with.
func (g *Gateway) clearCookie(w http.ResponseWriter, name, path string, sameSite http.SameSite) {
	g.jar().Clear(w, name, path, sameSite)
}
