package server

import (
	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/policy"
)

// maxClaimDepth bounds the copy of a claim set; claims decoded from a
// token are a small JSON tree.
const maxClaimDepth = 64

// inputOf checks req (authz.AuthorizeRequest.Normalized) and builds the
// policy input from it. User and Tenant stay empty: the engine fills them
// from the verified token and the configuration. Errors are *reason.Error
// with code reason.InputInvalid.
func inputOf(req authz.AuthorizeRequest) (engine.Input, error) {
	n, err := req.Normalized()
	if err != nil {
		return engine.Input{}, err
	}
	in := engine.Input{
		Action:   n.Action,
		Resource: policy.Resource{Type: n.Resource.Type, ID: n.Resource.ID, Tenant: n.Resource.Tenant, Attributes: n.Resource.Attributes},
	}
	if r := n.Request; r != nil {
		in.Request = &policy.Request{Method: r.Method, Path: r.Path, Host: r.Host, Query: r.Query, Headers: r.Headers}
	}
	return in, nil
}

// tokenDecisionOf converts an engine token decision. copyClaims is set
// when the claims leave for code that may modify them: the engine's are
// shared with its token cache.
func tokenDecisionOf(d engine.TokenDecision, copyClaims bool) authz.TokenDecision {
	out := authz.TokenDecision{
		Allowed:    d.Allowed,
		Claims:     d.Claims,
		Reason:     d.Reason,
		Subject:    d.Subject,
		TenantID:   d.TenantID,
		Message:    d.Message,
		DecisionID: d.DecisionID,
	}
	if copyClaims {
		out.Claims = cloneClaims(out.Claims)
	}
	return out
}

// decisionOf flattens an engine result into a Decision; copyClaims as for
// tokenDecisionOf.
func decisionOf(res engine.Result, copyClaims bool) authz.Decision {
	d := authz.Decision{
		Allowed:        res.Allowed(),
		Reason:         res.Decision.Reason,
		DenyReasons:    append([]string{}, res.Decision.DenyReasons...),
		DecisionID:     res.Decision.DecisionID,
		PolicyRevision: res.Decision.Revision,
		RetryAfter:     res.Decision.RetryAfter,
	}
	if !res.Token.Allowed {
		d.Reason = res.Token.Reason
		d.Message = res.Token.Message
		return d
	}
	d.Subject = res.Token.Subject
	d.TenantID = res.Token.TenantID
	d.Claims = res.Token.Claims
	if copyClaims {
		d.Claims = cloneClaims(d.Claims)
	}
	return d
}

// cloneClaims deep-copies the maps and slices of a claim set.
func cloneClaims(c map[string]any) map[string]any {
	if c == nil {
		return nil
	}
	return cloneValue(c, 0).(map[string]any)
}

func cloneValue(v any, depth int) any {
	if depth > maxClaimDepth {
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = cloneValue(e, depth+1)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = cloneValue(e, depth+1)
		}
		return s
	}
	return v
}
