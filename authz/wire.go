package authz

import (
	"google.golang.org/protobuf/types/known/durationpb"

	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/reason"
)

// The conversions between this package's types and the svc.authz.v1
// messages. The Client uses them one way, package authz/server the other;
// they are exported for servers and test doubles of the API.

// Proto returns d as a ValidateTokenResponse. Claims are converted so that
// the message always marshals: invalid UTF-8 is replaced, non-finite
// numbers and integers beyond ±2^53 become strings.
func (d TokenDecision) Proto() *authzv1.ValidateTokenResponse {
	return &authzv1.ValidateTokenResponse{
		Allowed:    d.Allowed,
		Claims:     claimsToStruct(d.Claims),
		Reason:     string(d.Reason),
		Subject:    d.Subject,
		TenantId:   d.TenantID,
		Message:    d.Message,
		DecisionId: d.DecisionID,
	}
}

// TokenDecisionFromProto returns the TokenDecision r carries; numeric
// claims become float64.
func TokenDecisionFromProto(r *authzv1.ValidateTokenResponse) TokenDecision {
	return TokenDecision{
		Allowed:    r.GetAllowed(),
		Claims:     structToClaims(r.GetClaims()),
		Reason:     reason.Code(r.GetReason()),
		Subject:    r.GetSubject(),
		TenantID:   r.GetTenantId(),
		Message:    r.GetMessage(),
		DecisionID: r.GetDecisionId(),
	}
}

// Proto returns d as an AuthorizeResponse, with deny_reasons never null
// and claims converted as TokenDecision.Proto does.
func (d Decision) Proto() *authzv1.AuthorizeResponse {
	r := &authzv1.AuthorizeResponse{
		Allowed:        d.Allowed,
		Reason:         string(d.Reason),
		DenyReasons:    d.DenyReasons,
		DecisionId:     d.DecisionID,
		Subject:        d.Subject,
		TenantId:       d.TenantID,
		Claims:         claimsToStruct(d.Claims),
		PolicyRevision: d.PolicyRevision,
		Message:        d.Message,
	}
	if r.DenyReasons == nil {
		r.DenyReasons = []string{}
	}
	if d.RetryAfter > 0 {
		r.RetryAfter = durationpb.New(d.RetryAfter)
	}
	return r
}

// DecisionFromProto returns the Decision r carries; DenyReasons is never
// nil and an invalid retry_after is dropped.
func DecisionFromProto(r *authzv1.AuthorizeResponse) Decision {
	d := Decision{
		Allowed:        r.GetAllowed(),
		Reason:         reason.Code(r.GetReason()),
		DenyReasons:    append([]string{}, r.GetDenyReasons()...),
		DecisionID:     r.GetDecisionId(),
		Subject:        r.GetSubject(),
		TenantID:       r.GetTenantId(),
		Claims:         structToClaims(r.GetClaims()),
		PolicyRevision: r.GetPolicyRevision(),
		Message:        r.GetMessage(),
	}
	if ra := r.GetRetryAfter(); ra != nil && ra.IsValid() {
		d.RetryAfter = ra.AsDuration()
	}
	return d
}

// AuthorizeRequestFromProto returns the AuthorizeRequest r carries,
// unchecked: see AuthorizeRequest.Normalized.
func AuthorizeRequestFromProto(r *authzv1.AuthorizeRequest) AuthorizeRequest {
	req := AuthorizeRequest{
		Token:  r.GetToken(),
		Action: r.GetAction(),
		Resource: Resource{
			Type:   r.GetResource().GetType(),
			ID:     r.GetResource().GetId(),
			Tenant: r.GetResource().GetTenant(),
		},
	}
	if a := r.GetResource().GetAttributes(); len(a.GetFields()) > 0 {
		req.Resource.Attributes = a.AsMap()
	}
	if ri := r.GetRequest(); ri != nil {
		req.Request = &RequestInfo{
			Method:  ri.GetMethod(),
			Path:    ri.GetPath(),
			Host:    ri.GetHost(),
			Query:   ri.GetQuery(),
			Headers: ri.GetHeaders(),
		}
	}
	return req
}

// Proto returns req as an AuthorizeRequest message. Request.SourceIP has
// no field there and is left out, and so are Resource.Attributes that
// are over their bounds or not JSON (ProtoChecked rejects them instead).
func (req AuthorizeRequest) Proto() *authzv1.AuthorizeRequest {
	r, err := req.ProtoChecked()
	if err != nil {
		req.Resource.Attributes = nil
		r, _ = req.ProtoChecked()
	}
	return r
}

// ProtoChecked is Proto, failing with a *reason.Error of code
// reason.InputInvalid when Resource.Attributes are over their bounds or
// not JSON: a policy must never see a resource without the attributes
// its caller meant it to see.
func (req AuthorizeRequest) ProtoChecked() (*authzv1.AuthorizeRequest, error) {
	r := &authzv1.AuthorizeRequest{
		Token:  req.Token,
		Action: req.Action,
	}
	attrs, err := attributesProto(req.Resource.Attributes)
	if err != nil {
		return nil, err
	}
	if res := req.Resource; res.Type != "" || res.ID != "" || res.Tenant != "" || attrs != nil {
		r.Resource = &authzv1.Resource{Type: res.Type, Id: res.ID, Tenant: res.Tenant, Attributes: attrs}
	}
	if ri := req.Request; ri != nil {
		r.Request = &authzv1.RequestInfo{
			Method:  ri.Method,
			Path:    ri.Path,
			Host:    ri.Host,
			Query:   ri.Query,
			Headers: ri.Headers,
		}
	}
	return r, nil
}
