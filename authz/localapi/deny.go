package localapi

import "encoding/json"

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

// denyWire is DenyBody without its MarshalJSON.
type denyWire DenyBody

// denyWithoutID is the body of a middleware refusal without a decision.
type denyWithoutID struct {
	Allow       bool     `json:"allow"`
	DenyReasons []string `json:"deny_reasons"`
	Reason      string   `json:"reason"`
}

// MarshalJSON writes deny_reasons as [] when there are none, and leaves
// decision_id out only under OmitEmptyDecisionID.
func (b DenyBody) MarshalJSON() ([]byte, error) {
	if b.DenyReasons == nil {
		b.DenyReasons = []string{}
	}
	if b.OmitEmptyDecisionID && b.DecisionID == "" {
		return json.Marshal(denyWithoutID{Allow: b.Allow, DenyReasons: b.DenyReasons, Reason: b.Reason})
	}
	return json.Marshal(denyWire(b))
}
