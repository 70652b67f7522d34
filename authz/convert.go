package authz

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/reason"
)

// Bounds of an AuthorizeRequest. They are generous for real requests and
// keep one caller from handing the policy engine megabytes of input.
const (
	maxActionLen     = 256
	maxResourceField = 1024
	maxMethodLen     = 32
	maxPathLen       = 8 << 10
	maxHostLen       = 1024
	maxRequestMap    = 256
	maxRequestValue  = 8 << 10
)

// droppedHeaders never reach a policy: they carry credentials.
var droppedHeaders = map[string]bool{
	"authorization":       true,
	"proxy-authorization": true,
	"cookie":              true,
}

// inputOf validates req and builds the policy input from it. User and
// Tenant stay empty: the engine fills them from the verified token and the
// configuration. Errors are *reason.Error with code reason.InputInvalid.
func inputOf(req AuthorizeRequest) (engine.Input, error) {
	if req.Action == "" {
		return engine.Input{}, reason.New(reason.InputInvalid, "action is required")
	}
	if err := checkText("action", req.Action, maxActionLen); err != nil {
		return engine.Input{}, err
	}
	res := req.Resource
	for _, f := range []struct{ name, v string }{
		{"resource.type", res.Type}, {"resource.id", res.ID}, {"resource.tenant", res.Tenant},
	} {
		if err := checkText(f.name, f.v, maxResourceField); err != nil {
			return engine.Input{}, err
		}
	}
	if res.Type == "" {
		if prefix, _, ok := strings.Cut(req.Action, ":"); ok {
			res.Type = prefix
		}
	}
	in := engine.Input{Action: req.Action, Resource: res}
	if req.Request != nil {
		r, err := requestOf(req.Request)
		if err != nil {
			return engine.Input{}, err
		}
		in.Request = r
	}
	return in, nil
}

func requestOf(r *RequestInfo) (*RequestInfo, error) {
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"request.method", r.Method, maxMethodLen}, {"request.path", r.Path, maxPathLen}, {"request.host", r.Host, maxHostLen},
	} {
		if err := checkText(f.name, f.v, f.max); err != nil {
			return nil, err
		}
	}
	out := &RequestInfo{Method: strings.ToUpper(r.Method), Path: r.Path, Host: r.Host}
	if len(r.Query) > maxRequestMap {
		return nil, reason.New(reason.InputInvalid, "request.query has more than %d entries", maxRequestMap)
	}
	if len(r.Headers) > maxRequestMap {
		return nil, reason.New(reason.InputInvalid, "request.headers has more than %d entries", maxRequestMap)
	}
	if len(r.Query) > 0 {
		out.Query = make(map[string]string, len(r.Query))
		for k, v := range r.Query {
			if !utf8.ValidString(k) || !utf8.ValidString(v) || len(k) > maxRequestValue || len(v) > maxRequestValue {
				return nil, reason.New(reason.InputInvalid, "request.query holds an invalid or oversized entry")
			}
			out.Query[k] = v
		}
	}
	if len(r.Headers) > 0 {
		out.Headers = make(map[string]string, len(r.Headers))
		for k, v := range r.Headers {
			name := strings.ToLower(k)
			if droppedHeaders[name] {
				continue
			}
			if !validHeaderName(name) || !utf8.ValidString(v) || len(v) > maxRequestValue {
				return nil, reason.New(reason.InputInvalid, "request.headers holds an invalid or oversized entry")
			}
			out.Headers[name] = v
		}
	}
	return out, nil
}

// checkText rejects values that are too long, not UTF-8 or that hold
// control characters (which would corrupt logs and audit lines). The
// message names the field, never its value.
func checkText(field, v string, max int) error {
	if len(v) > max {
		return reason.New(reason.InputInvalid, "%s is longer than %d bytes", field, max)
	}
	if !utf8.ValidString(v) {
		return reason.New(reason.InputInvalid, "%s is not valid UTF-8", field)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return reason.New(reason.InputInvalid, "%s holds a control character", field)
		}
	}
	return nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// decisionOf flattens an engine result into a Decision. copyClaims is set
// when the claims leave for code that may modify them: the engine's are
// shared with its token cache.
func decisionOf(res engine.Result, copyClaims bool) Decision {
	d := Decision{
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

func tokenResponseOf(d TokenDecision) *authzv1.ValidateTokenResponse {
	return &authzv1.ValidateTokenResponse{
		Allowed:  d.Allowed,
		Claims:   claimsToStruct(d.Claims),
		Reason:   string(d.Reason),
		Subject:  d.Subject,
		TenantId: d.TenantID,
		Message:  d.Message,
	}
}

func tokenDecisionOf(r *authzv1.ValidateTokenResponse) TokenDecision {
	return TokenDecision{
		Allowed:  r.GetAllowed(),
		Claims:   structToClaims(r.GetClaims()),
		Reason:   reason.Code(r.GetReason()),
		Subject:  r.GetSubject(),
		TenantID: r.GetTenantId(),
		Message:  r.GetMessage(),
	}
}

func authorizeResponseOf(d Decision) *authzv1.AuthorizeResponse {
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

func decisionOfResponse(r *authzv1.AuthorizeResponse) Decision {
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

func authorizeRequestOf(r *authzv1.AuthorizeRequest) AuthorizeRequest {
	req := AuthorizeRequest{
		Token:  r.GetToken(),
		Action: r.GetAction(),
		Resource: Resource{
			Type:   r.GetResource().GetType(),
			ID:     r.GetResource().GetId(),
			Tenant: r.GetResource().GetTenant(),
		},
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

func authorizeRequestToProto(req AuthorizeRequest) *authzv1.AuthorizeRequest {
	r := &authzv1.AuthorizeRequest{
		Token:  req.Token,
		Action: req.Action,
	}
	if req.Resource != (Resource{}) {
		r.Resource = &authzv1.Resource{Type: req.Resource.Type, Id: req.Resource.ID, Tenant: req.Resource.Tenant}
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
	return r
}
