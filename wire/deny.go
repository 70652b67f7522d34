package wire

import (
	"strconv"

	"github.com/svc-dev/svc/internal/jsonstr"
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
		dst = jsonstr.Append(dst, r, true)
	}
	dst = append(dst, `],"reason":`...)
	dst = jsonstr.Append(dst, b.Reason, true)
	if !b.OmitEmptyDecisionID || b.DecisionID != "" {
		dst = append(dst, `,"decision_id":`...)
		dst = jsonstr.Append(dst, b.DecisionID, true)
	}
	return append(dst, '}')
}
