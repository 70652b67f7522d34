package samlgw

import (
	"net/http"
	"time"

	"github.com/svc-dev/svc/wire"
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

// cookieName is the name the gateway gives the cookie base: base under
// wire.HostCookiePrefix when its cookies are Secure, else base.
func (g *Gateway) cookieName(base string) string {
	if g.secure {
		return wire.HostCookiePrefix + base
	}
	return base
}

// sessionCookieName is the name of the session cookie.
func (g *Gateway) sessionCookieName() string { return g.cookieName(g.cfg.CookieName) }

// setSessionCookie hands the browser its token, for as long as the token
// lives. SameSite=Lax: the cookie goes with top-level navigations from
// other sites (a link into the application), not with their forms or
// subresources.
func (g *Gateway) setSessionCookie(w http.ResponseWriter, token string, exp time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name: g.sessionCookieName(), Value: token, Path: "/",
		Expires: exp, MaxAge: int(exp.Sub(g.now()).Seconds()),
		HttpOnly: true, Secure: g.secure, SameSite: http.SameSiteLaxMode,
	})
	// A session cookie from before the prefix goes. The IdP's POST is
	// cross-site, so a browser does not send that SameSite=Lax cookie
	// here and whether it holds one cannot be seen: it is cleared
	// whenever the prefix is in use. (One a sibling subdomain set for the
	// parent domain cannot be cleared from here; the prefixed cookie
	// decides over it.)
	if g.secure {
		g.clearCookie(w, g.cfg.CookieName, "/", http.SameSiteLaxMode)
	}
}

// clearSessionCookie signs the browser out: the session cookie goes and,
// where it is prefixed, the unprefixed one of the same name too (a
// session from before the prefix).
func (g *Gateway) clearSessionCookie(w http.ResponseWriter) {
	g.clearCookie(w, g.sessionCookieName(), "/", http.SameSiteLaxMode)
	if g.secure {
		g.clearCookie(w, g.cfg.CookieName, "/", http.SameSiteLaxMode)
	}
}

// clearCookie tells the browser to drop the cookie name at path, with the
// attributes it was set with.
func (g *Gateway) clearCookie(w http.ResponseWriter, name, path string, sameSite http.SameSite) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: "", Path: path, MaxAge: -1, Expires: time.Unix(0, 0),
		HttpOnly: true, Secure: g.secure || sameSite == http.SameSiteNoneMode, SameSite: sameSite,
	})
}
