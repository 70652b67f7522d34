package envoy

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/svc-dev/svc/internal/refusalpage"
)

// Canonical keys of the headers an allowed check answers with, and of
// those it reads, computed once: http.Header.Set canonicalizes its key on
// every call, allocating for the lower-case names the gRPC answer uses.
var (
	canonCacheControl = http.CanonicalHeaderKey("Cache-Control")
	canonUserID       = http.CanonicalHeaderKey(HeaderUserID)
	canonTenantID     = http.CanonicalHeaderKey(HeaderTenantID)
	canonRoles        = http.CanonicalHeaderKey(HeaderRoles)
	canonDecisionID   = http.CanonicalHeaderKey(HeaderDecisionID)
	canonFailOpen     = http.CanonicalHeaderKey(HeaderFailOpen)
	canonIdentity     = http.CanonicalHeaderKey(HeaderIdentity)
	canonAuthRemove   = http.CanonicalHeaderKey(headerAuthRemove)

	canonContentType     = http.CanonicalHeaderKey("Content-Type")
	canonContentLength   = http.CanonicalHeaderKey("Content-Length")
	canonLocation        = http.CanonicalHeaderKey("Location")
	canonWWWAuthenticate = http.CanonicalHeaderKey("WWW-Authenticate")
	canonRetryAfter      = http.CanonicalHeaderKey("Retry-After")
	canonLogin           = http.CanonicalHeaderKey(HeaderLogin)
	canonStatus          = http.CanonicalHeaderKey(HeaderStatus)
	canonBody            = http.CanonicalHeaderKey(HeaderBody)
	canonSvcContentType  = http.CanonicalHeaderKey(headerContentType)
	canonSetCookie       = http.CanonicalHeaderKey(headerSetCookie)
	canonSetCookieNginx  = http.CanonicalHeaderKey(HeaderSetCookie)

	// The request headers a check reads: http.Header.Get canonicalizes
	// its key on every call, and allocates for HeaderNginxMethod, which
	// is not canonical.
	canonOriginalURI     = http.CanonicalHeaderKey(headerOriginalURI)
	canonForwardedURI    = http.CanonicalHeaderKey(headerForwardedURI)
	canonForwardedMethod = http.CanonicalHeaderKey(headerForwardedMethod)
	canonForwardedHost   = http.CanonicalHeaderKey(headerForwardedHost)
	canonNginxMethod     = http.CanonicalHeaderKey(HeaderNginxMethod)
	canonXFCC            = http.CanonicalHeaderKey(headerXFCC)
)

// allowedValues holds the values of the headers of an allowed check.
type allowedValues [8]string

// writeAllowed sets the headers of an allowed check on h, as h.Set would,
// with every value in one array rather than one slice per header. Each
// header's slice is capped at its one value, so that an h.Add later
// appends to a copy and never over another header's value.
//
// All six x-svc-* headers are always present: proxies copy them onto the
// upstream request by name, and some (Caddy before 2.9) copy an absent
// header as a literal placeholder. X-Svc-Identity is empty without an
// identity token, which nginx's proxy_set_header then leaves out. Envoy
// removes the ones that do not apply (x-envoy-auth-headers-to-remove,
// applied after the copy), x-svc-identity among them without a token.
//
// vals holds the values, each header's slice pointing into it; nil
// allocates one.
func writeAllowed(h http.Header, v verdict, conv convention, spoofed []string, vals *allowedValues) {
	if vals == nil {
		vals = new(allowedValues)
	}
	vals[0] = "no-store"
	vals[1] = v.subject
	vals[2] = v.tenantID
	vals[3] = v.roles
	vals[4] = v.decisionID
	vals[5] = "false"
	h[canonCacheControl] = vals[0:1:1]
	h[canonUserID] = vals[1:2:2]
	h[canonTenantID] = vals[2:3:3]
	h[canonRoles] = vals[3:4:4]
	h[canonDecisionID] = vals[4:5:5]
	h[canonFailOpen] = vals[5:6:6]
	vals[6] = v.identity
	h[canonIdentity] = vals[6:7:7]
	if conv == conventionEnvoy {
		vals[7] = HeaderFailOpen
		if v.identity == "" {
			vals[7] = HeaderFailOpen + "," + HeaderIdentity
		}
		if len(spoofed) > 0 {
			vals[7] += "," + strings.Join(spoofed, ",")
		}
		h[canonAuthRemove] = vals[7:8:8]
	}
	if v.setCookie != "" {
		setCookieHeader(h, v.setCookie, conv)
	}
}

// setCookieHeader hands the client a renewed (or cleared) session: in
// Set-Cookie, which Envoy's http_service passes on
// (allowed_client_headers, allowed_client_headers_on_success), or, for
// nginx, whose auth_request passes no header on by itself, in
// X-Svc-Set-Cookie, which the shipped nginx.conf adds as Set-Cookie.
func setCookieHeader(h http.Header, c string, conv convention) {
	if conv == conventionNginx {
		h[canonSetCookieNginx] = []string{c}
		return
	}
	h[canonSetCookie] = []string{c}
}

// writeDenied sets the headers of a denied check on h, as h.Set would,
// with every value in one array (see writeAllowed), and returns the
// status to answer with. ct and body are the denial's answer.
func writeDenied(h http.Header, v verdict, conv convention, ct string, body []byte) int {
	vals := new([9]string)
	n := 0
	set := func(key, value string) {
		vals[n] = value
		h[key] = vals[n : n+1 : n+1]
		n++
	}
	set(canonCacheControl, "no-store")
	if v.html {
		refusalpage.SetHeaders(h)
	}
	set(canonContentType, ct)
	status := v.status
	switch {
	case v.redirect && conv == conventionNginx:
		// auth_request passes a 401 on, never a 302: the shipped
		// nginx.conf answers 302 to X-Svc-Login.
		set(canonLogin, v.login)
	case v.redirect:
		status = http.StatusFound
		set(canonLocation, v.login)
	}
	if v.wwwAuthenticate != "" && status == http.StatusUnauthorized {
		set(canonWWWAuthenticate, v.wwwAuthenticate)
	}
	if v.retryAfter != "" {
		set(canonRetryAfter, v.retryAfter)
	}
	if v.setCookie != "" {
		setCookieHeader(h, v.setCookie, conv)
	}
	// Envoy's http_service takes a 5xx from the authorization server for
	// an outage and lets the request through under failure_mode_allow: a
	// sidecar that answered (policy-error, jwks-unavailable) says 403 to it,
	// with the real status in X-Svc-Status as for nginx.
	if conv == conventionNginx || (conv == conventionEnvoy && status >= http.StatusInternalServerError) {
		set(canonStatus, statusString(v.status))
		set(canonBody, asciiJSON(body))
		if conv == conventionNginx && v.html {
			// The shipped nginx.conf answers with JSON when it is absent.
			set(canonSvcContentType, ct)
		}
		if status != http.StatusUnauthorized && status != http.StatusForbidden {
			status = http.StatusForbidden
		}
	}
	set(canonContentLength, strconv.Itoa(len(body)))
	return status
}

// statusString is strconv.Itoa(code), without allocating for the
// statuses of denials.
func statusString(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "400"
	case http.StatusUnauthorized:
		return "401"
	case http.StatusForbidden:
		return "403"
	case http.StatusTooManyRequests:
		return "429"
	case http.StatusInternalServerError:
		return "500"
	case http.StatusServiceUnavailable:
		return "503"
	}
	return strconv.Itoa(code)
}

// headerKey is what lowerHeaders needs to know of a request header's
// canonical key: its lower-case form and whether it names the original
// request (checkControlHeaders).
type headerKey struct {
	lower   string
	control bool
}

// lowerKeys maps the canonical keys of the headers that proxies pass on
// most often to their lower-case form, so that lowerHeaders allocates no
// new key for them and finds, in the same lookup, whether the header is
// one of checkControlHeaders. Any other key is lower-cased as it comes.
var lowerKeys = func() map[string]headerKey {
	names := []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Authorization",
		"Baggage", "Cache-Control", "Connection", "Content-Length",
		"Content-Type", "Cookie", "Dnt", "Forwarded", "Host",
		"If-Modified-Since", "If-None-Match", "Origin", "Pragma", "Priority",
		"Proxy-Authorization", "Referer", "Sec-Ch-Ua", "Sec-Ch-Ua-Mobile",
		"Sec-Ch-Ua-Platform", "Sec-Fetch-Dest", "Sec-Fetch-Mode",
		"Sec-Fetch-Site", "Sec-Fetch-User", "Te", "Traceparent", "Tracestate",
		"Upgrade-Insecure-Requests", "User-Agent", "Via",
		"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Method",
		"X-Forwarded-Port", "X-Forwarded-Prefix", "X-Forwarded-Proto",
		"X-Forwarded-Server", "X-Forwarded-Ssl", "X-Forwarded-Uri",
		"X-Http-Method", "X-Http-Method-Override", "X-Method-Override",
		"X-Original-Method", "X-Original-Uri", "X-Original-Url", "X-Real-Ip", "X_Svc_Method",
		"X-Api-Key", "X-Forwarded-Client-Cert", "X-Request-Id", "X-Requested-With", "X-Scheme",
	}
	m := make(map[string]headerKey, len(names))
	for _, n := range names {
		lk := strings.ToLower(n)
		m[http.CanonicalHeaderKey(n)] = headerKey{lower: lk, control: checkControlHeaders[lk]}
	}
	return m
}()

// lowerKey is the headerKey of k: from lowerKeys without allocating,
// else strings.ToLower(k).
func lowerKey(k string) headerKey {
	if hk, ok := lowerKeys[k]; ok {
		return hk
	}
	lk := strings.ToLower(k)
	return headerKey{lower: lk, control: checkControlHeaders[lk]}
}
