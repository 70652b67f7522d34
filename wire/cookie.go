package wire

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// HostCookiePrefix is the prefix the SAML gateway gives every cookie it
// sets wherever it marks them Secure (any acs_url but plain http on a
// loopback host): "__Host-svc_session", "__Host-svc_session_req". A
// browser keeps a cookie so named only when it is Secure, has Path=/ and
// no Domain, and was set by the host itself, so a sibling subdomain
// (evil.example.com next to app.example.com) can neither plant nor
// overwrite it: the session fixation and login CSRF that an unprefixed
// cookie tossed with Domain=example.com would allow. sdk.saml.cookie_name
// stays unprefixed in the configuration.
const HostCookiePrefix = "__Host-"

// SessionCookie returns the value of the session cookie name in r: the
// cookie HostCookiePrefix+name when r carries one, else the cookie name,
// and whether either was there. The prefixed cookie wins even when the
// unprefixed one comes first in the Cookie header, so a cookie tossed by
// a sibling subdomain cannot displace the session the gateway set. The
// unprefixed name is still read for a gateway on plain http on loopback,
// which sets no prefixed cookie. Every middleware and proxy check reads
// the session cookie by this rule.
func SessionCookie(r *http.Request, name string) (string, bool) {
	if name == "" {
		return "", false
	}
	if c, err := r.Cookie(HostCookiePrefix + name); err == nil {
		return c.Value, true
	}
	if c, err := r.Cookie(name); err == nil {
		return c.Value, true
	}
	return "", false
}

// SessionCookieFrom is SessionCookie, except that with prefixedOnly only
// the cookie HostCookiePrefix+name is read. A deployment whose gateway
// names its cookies with the prefix (PrefixesCookies of its public URL)
// sets no unprefixed session cookie: one in a request can only have been
// tossed in by a sibling subdomain for the parent domain, and a browser
// without a session of its own would be signed in as whoever it names.
func SessionCookieFrom(r *http.Request, name string, prefixedOnly bool) (string, bool) {
	if !prefixedOnly {
		return SessionCookie(r, name)
	}
	if name == "" {
		return "", false
	}
	if c, err := r.Cookie(HostCookiePrefix + name); err == nil {
		return c.Value, true
	}
	return "", false
}

// PrefixesCookies reports whether a sign-in gateway whose public URL
// (sdk.saml.acs_url, an OpenID Connect redirect_url) is raw marks its
// cookies Secure and names them with HostCookiePrefix: everywhere but on
// plain http on a loopback host. A URL that does not parse counts as
// Secure; the configuration refuses it before any sign-in.
func PrefixesCookies(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return true
	}
	return !(u.Scheme == "http" && LoopbackHost(u.Hostname()))
}

// LoopbackHost reports whether host (without a port) is "localhost" or a
// loopback IP address.
func LoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ValidCookieName reports whether name may name the session cookie
// (sdk.saml.cookie_name, sdk.session.cookie_name): one or more ASCII
// letters, digits, '-', '_' and '.'. The sidecar's configuration and the
// Go client check the name by this rule.
func ValidCookieName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}

// PrefixedCookieName reports whether name starts with "__Host-" or
// "__Secure-", in any case. sdk.saml.cookie_name must not: the gateway
// names its cookies __Host-<cookie_name> wherever they are Secure, and
// the checks look for "__Host-" + the name ("__Host-__Host-x" would be
// no cookie's).
func PrefixedCookieName(name string) bool {
	return hasPrefixFold(name, HostCookiePrefix) || hasPrefixFold(name, "__Secure-")
}

// SAMLCookieNameProblem says what is wrong with name as
// sdk.saml.cookie_name, "" when nothing is: not a ValidCookieName, or a
// PrefixedCookieName. The sidecar's configuration and the Go client
// refuse a name with the same words.
func SAMLCookieNameProblem(name string) string {
	switch {
	case !ValidCookieName(name):
		return fmt.Sprintf("must be a cookie name (letters, digits, '-', '_', '.'), got %q", name)
	case PrefixedCookieName(name):
		return fmt.Sprintf("must not start with __Host- or __Secure-: the gateway names its cookies __Host-<cookie_name> "+
			"wherever they are Secure, got %q", name)
	}
	return ""
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
