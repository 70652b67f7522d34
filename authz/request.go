package authz

import (
	"strings"
	"unicode/utf8"

	"github.com/svc-dev/svc/internal/resattrs"
	"github.com/svc-dev/svc/reason"
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
	"x-api-key":           true,
}

// Normalized returns req checked against the bounds of the API and in the
// form a server gives the policy: Resource.Type taken from the action's
// prefix when empty, the request's method upper-cased, its credential
// headers (Authorization, Proxy-Authorization, Cookie) dropped and header
// names lower-cased, Resource.Attributes as JSON values (numbers as
// json.Number, nil when empty). Token is kept as is. A request out of bounds (no
// action, an oversized or non-UTF-8 field, a control character, a header
// name that is not a token, attributes over their bounds or not JSON) is a *reason.Error with code
// reason.InputInvalid whose message names the field, never its value.
func (req AuthorizeRequest) Normalized() (AuthorizeRequest, error) {
	if req.Action == "" {
		return AuthorizeRequest{}, reason.New(reason.InputInvalid, "action is required")
	}
	if err := resattrs.CheckText("action", req.Action, maxActionLen); err != nil {
		return AuthorizeRequest{}, err
	}
	res := req.Resource
	for _, f := range []struct{ name, v string }{
		{"resource.type", res.Type}, {"resource.id", res.ID}, {"resource.tenant", res.Tenant},
	} {
		if err := resattrs.CheckText(f.name, f.v, maxResourceField); err != nil {
			return AuthorizeRequest{}, err
		}
	}
	attrs, err := resattrs.Normalize(res.Attributes)
	if err != nil {
		return AuthorizeRequest{}, err
	}
	res.Attributes = attrs
	if res.Type == "" {
		if prefix, _, ok := strings.Cut(req.Action, ":"); ok {
			res.Type = prefix
		}
	}
	out := AuthorizeRequest{Token: req.Token, Action: req.Action, Resource: res}
	if req.Request != nil {
		r, err := requestOf(req.Request)
		if err != nil {
			return AuthorizeRequest{}, err
		}
		out.Request = r
	}
	return out, nil
}

func requestOf(r *RequestInfo) (*RequestInfo, error) {
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"request.method", r.Method, maxMethodLen}, {"request.path", r.Path, maxPathLen}, {"request.host", r.Host, maxHostLen},
	} {
		if err := resattrs.CheckText(f.name, f.v, f.max); err != nil {
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
