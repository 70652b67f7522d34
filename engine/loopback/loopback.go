// Package loopback says which addresses stay on this host: the one rule
// by which configuration validation, the JWKS fetcher, the SAML gateway
// and the policy bundle poller accept plain http (for key material and
// policy, only on loopback), follow redirects, and set the Secure
// attribute of cookies.
package loopback

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/svc-dev/svc/wire"
)

// Host reports whether host (a name or an IP address, without a port) is
// localhost, in 127.0.0.0/8 or ::1. Host names are case-insensitive.
func Host(host string) bool { return wire.LoopbackHost(host) }

// SecureURL reports whether u may carry keys or trusted documents: https,
// or plain http to a loopback host.
func SecureURL(u *url.URL) bool {
	return u.Scheme == "https" || u.Scheme == "http" && Host(u.Hostname())
}

// MaxRedirects bounds the redirects CheckRedirect follows in one fetch.
const MaxRedirects = 5

// ErrRedirectRefused matches, with errors.Is, the error of a redirect
// CheckRedirect refuses.
var ErrRedirectRefused = errors.New("redirect refused")

// credentialHeaders are the request headers that never follow a redirect
// to another origin.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie"}

// NoRedirect is the http.Client CheckRedirect of every request that
// carries credentials to one configured endpoint (token introspection,
// an OpenID Connect token request, a decision-log upload): a redirect is
// never followed, since a 307 or 308 would resend the credentials to
// whatever the Location names; the 3xx is the answer.
func NoRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// EndpointURL reports whether u, an endpoint a fetched document names
// (an OpenID Connect discovery document's jwks_uri or token_endpoint),
// may be used: absolute, without credentials, and SecureURL.
func EndpointURL(u *url.URL) bool { return u.Host != "" && u.User == nil && SecureURL(u) }

// CheckRedirect is the http.Client CheckRedirect of every fetch of keys,
// trusted documents or policy (JWKS, SAML metadata, policy bundles): it
// follows at most MaxRedirects redirects, each to a URL SecureURL accepts,
// and drops the credential headers (Authorization, Proxy-Authorization,
// Cookie) from a hop whose origin (scheme, host and port) is not the first
// request's. net/http drops them only when the host changes, so an https
// origin redirecting to plain http, or to another port, on the same host
// would otherwise receive them. Its errors match ErrRedirectRefused.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= MaxRedirects {
		return fmt.Errorf("%w: more than %d redirects", ErrRedirectRefused, MaxRedirects)
	}
	if !SecureURL(req.URL) {
		return fmt.Errorf("%w: redirect to %s://%s refused: only https, or http on a loopback host",
			ErrRedirectRefused, req.URL.Scheme, req.URL.Host)
	}
	if len(via) > 0 && !SameOrigin(req.URL, via[0].URL) {
		for _, h := range credentialHeaders {
			req.Header.Del(h)
		}
	}
	return nil
}

// SameOrigin reports whether a and b have the same scheme, host and port,
// the port defaulting to the scheme's. Host names are case-insensitive.
func SameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) &&
		strings.EqualFold(a.Hostname(), b.Hostname()) &&
		port(a) == port(b)
}

// port is u's port, or its scheme's default.
func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// unixScheme prefixes a listen address that is a Unix domain socket
// (config.UnixScheme; this package cannot import config, which imports it).
const unixScheme = "unix://"

// ListenAddr reports whether a listen address stays on this host: a Unix
// domain socket (unix:///path), which only local processes can reach, or
// host:port whose host Host accepts. An empty host (":7701") binds every
// interface and is not loopback, and neither is a name other than
// localhost: what it resolves to can change after the check.
func ListenAddr(addr string) bool {
	if strings.HasPrefix(addr, unixScheme) {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	return err == nil && host != "" && Host(host)
}
