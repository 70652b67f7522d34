// Package signincookie names and sets the cookies of the browser sign-in
// gateways (SAML and OpenID Connect): the session cookie that carries the
// sidecar's session token, and the cookies that bind a sign-in in
// progress to the browser that started it.
//
// Wherever a gateway's cookies are Secure (its public URL is not plain
// http on a loopback host) every cookie it sets is named
// "__Host-<name>" (wire.HostCookiePrefix), with Path=/ and no Domain, as
// the prefix requires: a browser refuses a cookie so named from any other
// host, so a sibling subdomain that can set cookies for the parent domain
// cannot toss in its own session (session fixation) or its own pending
// sign-in (login CSRF). On plain http on loopback (local development) the
// names stay unprefixed: a browser keeps no __Host- cookie that is not
// Secure.
package signincookie

import (
	"net/http"
	"net/url"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/wire"
)

// Jar sets the cookies of one gateway.
type Jar struct {
	// Secure marks the cookies Secure and names them with the prefix.
	Secure bool
	// Session is the session cookie's unprefixed name
	// (sdk.session.cookie_name).
	Session string
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// SecureFor reports whether the cookies of a gateway whose public URL is
// u are Secure: everywhere but plain http on a loopback host.
func SecureFor(u *url.URL) bool {
	return !(u.Scheme == "http" && wire.LoopbackHost(u.Hostname()))
}

// PrefixedOnly reports whether every sign-in gateway cfg configures
// ([sdk.saml], [sdk.oidc] and its providers) sets Secure, prefixed
// cookies, so that an unprefixed session cookie can only be one that a
// sibling subdomain tossed in, and the checks must not read it. A gateway
// on plain http on loopback (local development) sets unprefixed cookies,
// and then they are read. A URL that does not parse counts as Secure: the
// configuration refuses it before any check.
func PrefixedOnly(cfg config.Config) bool {
	var urls []string
	if s := cfg.SDK.SAML; s != nil {
		urls = append(urls, s.ACSURL)
	}
	for _, p := range cfg.SDK.OIDC.All() {
		urls = append(urls, p.RedirectURL)
	}
	if len(urls) == 0 {
		return false
	}
	for _, raw := range urls {
		if !wire.PrefixesCookies(raw) {
			return false
		}
	}
	return true
}

// Name is the name the jar gives the cookie base: base under
// wire.HostCookiePrefix when its cookies are Secure, else base.
func (j Jar) Name(base string) string {
	if j.Secure {
		return wire.HostCookiePrefix + base
	}
	return base
}

// SessionName is the name of the session cookie.
func (j Jar) SessionName() string { return j.Name(j.Session) }

func (j Jar) now() time.Time {
	if j.Now == nil {
		return time.Now()
	}
	return j.Now()
}

// SetSession hands the browser its token, for as long as the token lives.
// SameSite=Lax: the cookie goes with top-level navigations from other
// sites (a link into the application), not with their forms or
// subresources. Where the prefix is in use an unprefixed session cookie
// from before it is cleared (whether the browser holds one cannot be
// seen on a cross-site request).
func (j Jar) SetSession(w http.ResponseWriter, token string, exp time.Time) {
	http.SetCookie(w, j.SessionCookie(token, exp))
	if j.Secure {
		j.Clear(w, j.Session, "/", http.SameSiteLaxMode)
	}
}

// SessionCookie is the session cookie SetSession sets.
func (j Jar) SessionCookie(token string, exp time.Time) *http.Cookie {
	return &http.Cookie{
		Name: j.SessionName(), Value: token, Path: "/",
		Expires: exp, MaxAge: int(exp.Sub(j.now()).Seconds()),
		HttpOnly: true, Secure: j.Secure, SameSite: http.SameSiteLaxMode,
	}
}

// Cleared is the cookie that tells the browser to drop the cookie name at
// path, with the attributes it was set with.
func (j Jar) Cleared(name, path string, sameSite http.SameSite) *http.Cookie {
	return &http.Cookie{
		Name: name, Value: "", Path: path, MaxAge: -1, Expires: time.Unix(0, 0),
		HttpOnly: true, Secure: j.Secure || sameSite == http.SameSiteNoneMode, SameSite: sameSite,
	}
}

// ClearSession signs the browser out: the session cookie goes and, where
// it is prefixed, the unprefixed one of the same name too.
func (j Jar) ClearSession(w http.ResponseWriter) {
	j.Clear(w, j.SessionName(), "/", http.SameSiteLaxMode)
	if j.Secure {
		j.Clear(w, j.Session, "/", http.SameSiteLaxMode)
	}
}

// Clear tells the browser to drop the cookie name at path, with the
// attributes it was set with.
func (j Jar) Clear(w http.ResponseWriter, name, path string, sameSite http.SameSite) {
	http.SetCookie(w, j.Cleared(name, path, sameSite))
}
