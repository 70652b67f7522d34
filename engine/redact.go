package engine

import (
	"encoding/json"
	"maps"
	"strings"
)

// Redacted replaces a value RedactedInput hides.
const Redacted = "[REDACTED]"

// visibleHeaders are the request headers RedactedInput shows; any other
// header may carry a credential or personal data.
var visibleHeaders = map[string]bool{
	"accept": true, "content-type": true, "user-agent": true, "x-request-id": true,
	"traceparent": true, ":method": true, ":path": true, ":authority": true,
}

// RedactedInput is in as JSON for a person to read, with what identifies
// beyond the subject hidden: every claim except sub (user.id), tenant_id
// and the roles is replaced by Redacted (user.email and each
// user.claims and identity.claims value), and so are request header values other than a few
// harmless ones and the query values.
func RedactedInput(in Input) []byte {
	if in.User.Email != "" {
		in.User.Email = Redacted
	}
	in.User.Claims = redactedClaims(in.User.Claims)
	if id := in.Identity; id != nil {
		ic := *id
		ic.Claims = redactedClaims(id.Claims)
		in.Identity = &ic
	}
	if r := in.Request; r != nil {
		rc := *r
		if len(r.Headers) > 0 {
			rc.Headers = maps.Clone(r.Headers)
			for k := range rc.Headers {
				if !visibleHeaders[strings.ToLower(k)] {
					rc.Headers[k] = Redacted
				}
			}
		}
		if len(r.Query) > 0 {
			rc.Query = maps.Clone(r.Query)
			for k := range rc.Query {
				rc.Query[k] = Redacted
			}
		}
		in.Request = &rc
	}
	b, err := json.Marshal(in)
	if err != nil {
		return []byte(`{"error":"input not representable"}`)
	}
	return b
}

// redactedClaims is claims with every value replaced by Redacted.
func redactedClaims(claims map[string]any) map[string]any {
	if len(claims) == 0 {
		return claims
	}
	c := make(map[string]any, len(claims))
	for k := range claims {
		c[k] = Redacted
	}
	return c
}
