package localapi

import (
	"strconv"
	"unicode/utf8"
)

// DenyBody is the JSON body of every refused request, whether the proxy
// check (Envoy ext_authz, the nginx/Caddy HTTP check) or an application
// middleware (Go, Python, TypeScript) refused it.
type DenyBody struct {
	// Allow is always false.
	Allow bool `json:"allow"`
	// DenyReasons are the policy's reasons, sorted; empty (never null)
	// when the request was refused before the policy ran.
	DenyReasons []string `json:"deny_reasons"`
	// Reason is the stable code of the outcome: a token failure such as
	// "token-expired", "policy-deny", "rate-limited", "policy-error" or
	// "input-invalid".
	Reason string `json:"reason"`
	// DecisionID identifies the policy evaluation, when there was one.
	DecisionID string `json:"decision_id"`
	// OmitEmptyDecisionID leaves decision_id out when it is empty, as the
	// application middlewares do; the proxy check always writes it.
	OmitEmptyDecisionID bool `json:"-"`
}

// MarshalJSON writes deny_reasons as [] when there are none, and leaves
// decision_id out only under OmitEmptyDecisionID: AppendJSON's bytes.
func (b DenyBody) MarshalJSON() ([]byte, error) {
	n := len(`{"allow":false,"deny_reasons":[],"reason":"","decision_id":""}`) + len(b.Reason) + len(b.DecisionID)
	for _, r := range b.DenyReasons {
		n += len(r) + 3
	}
	return b.AppendJSON(make([]byte, 0, n)), nil
}

// AppendJSON appends b's JSON to dst: the fields in order, deny_reasons
// [] when there are none, decision_id left out only under
// OmitEmptyDecisionID, strings escaped as encoding/json escapes them (HTML
// characters, U+2028 and U+2029 included; invalid UTF-8 as U+FFFD). It
// writes what encoding/json wrote for these fields, without reflection.
func (b DenyBody) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"allow":`...)
	dst = strconv.AppendBool(dst, b.Allow)
	dst = append(dst, `,"deny_reasons":[`...)
	for i, r := range b.DenyReasons {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, r)
	}
	dst = append(dst, `],"reason":`...)
	dst = appendJSONString(dst, b.Reason)
	if !b.OmitEmptyDecisionID || b.DecisionID != "" {
		dst = append(dst, `,"decision_id":`...)
		dst = appendJSONString(dst, b.DecisionID)
	}
	return append(dst, '}')
}

// appendJSONString quotes s as encoding/json does by default: '"', '\\',
// control characters (\b \f \n \r \t, others \u00xx), '<', '>', '&',
// U+2028 and U+2029 escaped, invalid UTF-8 replaced by \ufffd.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
