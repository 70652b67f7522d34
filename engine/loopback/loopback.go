// Package loopback says which addresses stay on this host: the one rule
// by which configuration validation, the JWKS fetcher and the SAML
// gateway accept plain http (for key material, only on loopback) and set
// the Secure attribute of cookies.
package loopback

import (
	"net"
	"net/url"
	"strings"
)

// Host reports whether host (a name or an IP address, without a port) is
// localhost, in 127.0.0.0/8 or ::1. Host names are case-insensitive.
func Host(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// SecureURL reports whether u may carry keys or trusted documents: https,
// or plain http to a loopback host.
func SecureURL(u *url.URL) bool {
	return u.Scheme == "https" || u.Scheme == "http" && Host(u.Hostname())
}
