package sidecar

import (
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/svc-dev/svc/internal/secretfile"

	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// readPrefix is the prefix of the JSON API: status, config,
// validate-token, authorize, streams. Everything under it passes the read
// guard; mutating endpoints pass the admin guard as well.
const readPrefix = "/v1/"

// guardReads wraps the whole HTTP handler: requests under /v1/ must come
// from loopback, carry the admin token, or be allowed by
// sidecar.public_read. The health, metrics and proxy check paths stay
// open: probes and proxies call them.
func (s *Server) guardReads(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, readPrefix) {
			next.ServeHTTP(w, r)
			return
		}
		if s.refuse(w, r, s.deps.Engine.Config().Sidecar.PublicRead) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// admin guards mutating endpoints (and the streams and dry-run
// sessions): loopback callers, or any caller with the configured admin
// token as a bearer token; never a browser's cross-site request, and
// never a loopback caller that names a host the sidecar does not answer
// to. With sidecar.admin_require_token, loopback and Unix socket callers
// need the token too.
func (s *Server) admin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.refuse(w, r, false) {
			return
		}
		if s.deps.Engine.Config().Sidecar.AdminRequireToken && !s.adminTokenOK(r) {
			w.Header().Set("Connection", "close")
			wire.WriteError(w, http.StatusForbidden, wire.Indented, string(reason.AdminTokenRequired),
				"this endpoint requires the admin token from every caller (sidecar.admin_require_token)")
			return
		}
		next(w, r)
	}
}

// refuse answers 403 and returns true when r may not pass. It decides on
// headers and the peer address alone, before any of the body is read,
// and closes the connection so that the unread body is not drained.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, publicRead bool) bool {
	code, msg := s.check(r, publicRead)
	if code == "" {
		return false
	}
	w.Header().Set("Connection", "close")
	wire.WriteError(w, http.StatusForbidden, wire.Indented, string(code), msg)
	return true
}

func (s *Server) check(r *http.Request, publicRead bool) (reason.Code, string) {
	if crossSite(r) {
		return reason.CrossSiteRequest, "cross-site browser requests are refused"
	}
	if isLocalPeer(r.RemoteAddr) {
		// A page on another origin can make a browser on this host call
		// 127.0.0.1 under a name it controls; a loopback caller must name
		// a host we are, unless it holds the token no page can have.
		if s.hostAllowed(r.Host) || s.adminTokenOK(r) {
			return "", ""
		}
		return reason.HostNotAllowed, "the Host header names neither this listener nor a host in sidecar.allowed_hosts"
	}
	if publicRead || s.adminTokenOK(r) {
		return "", ""
	}
	return reason.AdminTokenRequired, "this endpoint accepts loopback callers or the admin token only"
}

// crossSite reports a request a browser sent on behalf of another site:
// Sec-Fetch-Site other than same-origin or none, or an Origin whose
// host is not the request's Host.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return true // "null" and anything unparseable
	}
	return !strings.EqualFold(u.Host, r.Host)
}

// hostAllowed accepts a Host that is an IP literal (no name to rebind),
// localhost, the host of the listen address, or one of
// sidecar.allowed_hosts. An empty Host (HTTP/1.0) is accepted.
func (s *Server) hostAllowed(hostport string) bool {
	if hostport == "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") {
		return true
	}
	if listen, _, err := net.SplitHostPort(s.deps.Engine.Config().Sidecar.HTTPAddr); err == nil && strings.EqualFold(host, listen) {
		return true
	}
	return slices.ContainsFunc(s.deps.Engine.Config().Sidecar.AllowedHosts, func(h string) bool {
		return strings.EqualFold(h, host)
	})
}

func (s *Server) adminTokenOK(r *http.Request) bool {
	file := s.deps.Engine.Config().Sidecar.AdminTokenFile
	if file == "" {
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	want, err := secretfile.Read("sidecar.admin_token_file", file)
	if err != nil {
		s.log.Error("admin token file unusable", "setting", s.deps.Engine.Config().Setting("sidecar.admin_token_file"), "err", errors.Unwrap(err))
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// isLocalPeer reports a loopback TCP peer, or a peer on a Unix socket
// (whose file mode already decided who may connect).
func isLocalPeer(remote string) bool {
	if remote == "@" || remote == "" {
		return true
	}
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
