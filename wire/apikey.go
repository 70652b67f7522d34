package wire

import "strings"

// APIKeyFromHeaders returns the API key a request presents in its
// headers' values: the credential of an Authorization header using the
// ApiKey scheme (case-insensitive), else, when the request has no
// Authorization header at all, the X-Api-Key header. "" when it presents
// none: an Authorization header of another scheme (a bearer token)
// decides. The proxy checks, the sidecar's HTTP API and the client
// middleware all read a key by this rule.
func APIKeyFromHeaders(authorization string, hasAuthorization bool, xAPIKey string) string {
	if !hasAuthorization {
		return strings.TrimSpace(xAPIKey)
	}
	v := strings.TrimSpace(authorization)
	const scheme = "apikey"
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return ""
	}
	if c := v[len(scheme)]; c != ' ' && c != '\t' {
		return ""
	}
	return strings.TrimSpace(v[len(scheme)+1:])
}
