package envoy

import (
	"net/http"
	"strings"
)

// Canonical keys of the headers an allowed check answers with, computed
// once: http.Header.Set canonicalizes its key on every call, allocating
// for the lower-case names the gRPC answer uses.
var (
	canonCacheControl = http.CanonicalHeaderKey("Cache-Control")
	canonUserID       = http.CanonicalHeaderKey(HeaderUserID)
	canonTenantID     = http.CanonicalHeaderKey(HeaderTenantID)
	canonRoles        = http.CanonicalHeaderKey(HeaderRoles)
	canonDecisionID   = http.CanonicalHeaderKey(HeaderDecisionID)
	canonFailOpen     = http.CanonicalHeaderKey(HeaderFailOpen)
	canonAuthRemove   = http.CanonicalHeaderKey(headerAuthRemove)
)

// writeAllowed sets the headers of an allowed check on h, as h.Set would,
// with every value in one array rather than one slice per header. Each
// header's slice is capped at its one value, so that an h.Add later
// appends to a copy and never over another header's value.
//
// All five x-svc-* headers are always present: proxies copy them onto the
// upstream request by name, and some (Caddy before 2.9) copy an absent
// header as a literal placeholder. Envoy removes the ones that do not
// apply (x-envoy-auth-headers-to-remove, applied after the copy).
func writeAllowed(h http.Header, v verdict, conv convention, spoofed []string) {
	vals := new([7]string)
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
	if conv == conventionEnvoy {
		vals[6] = HeaderFailOpen
		if len(spoofed) > 0 {
			vals[6] += "," + strings.Join(spoofed, ",")
		}
		h[canonAuthRemove] = vals[6:7:7]
	}
}

// lowerKeys maps the canonical keys of the headers that proxies pass on
// most often to their lower-case form, so that lowerHeaders allocates no
// new key for them. Any other key is lower-cased as it comes.
var lowerKeys = func() map[string]string {
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
		"X-Original-Method", "X-Original-Uri", "X-Original-Url", "X-Real-Ip",
		"X-Request-Id", "X-Requested-With", "X-Scheme",
	}
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[http.CanonicalHeaderKey(n)] = strings.ToLower(n)
	}
	return m
}()

// lowerKey is strings.ToLower(k), without allocating for the keys in
// lowerKeys.
func lowerKey(k string) string {
	if lk, ok := lowerKeys[k]; ok {
		return lk
	}
	return strings.ToLower(k)
}
