package introspect

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"

	"github.com/svc-dev/svc/reason"
)

// MaxAnswerSize bounds the body of an introspection answer that is read:
// a longer one is introspection-invalid.
const MaxAnswerSize = 64 << 10

// Answer is what the introspection endpoint said about an active token.
type Answer struct {
	// Subject is the sub member.
	Subject string
	// Tenant is the member named by Options.TenantClaim.
	Tenant string
	// Roles is the roles member (an array of strings, or one string), or
	// else the space-separated scope member; never nil.
	Roles []string
	// Exp is the exp member (Unix seconds), 0 when absent.
	Exp int64
	// NotBefore is the nbf member (Unix seconds), 0 when absent.
	NotBefore int64
	// Audiences is the aud member (one string or an array of strings),
	// nil when absent.
	Audiences []string
	// Claims is the whole answer, the active member included, as the
	// claims of the token.
	Claims map[string]any
	// Derived is Options.Derive's value for the answer, built once when
	// it was received and shared by every request with the token.
	Derived any
}

// parse reads an introspection answer: (nil, nil) for active: false and
// for a token that is no bearer token (usableAsBearer), the active
// token's Answer, or an introspection-invalid error for anything
// that is not an RFC 7662 answer. tenantClaim names the tenant member.
// Only the shapes are checked here; what the claims grant is the
// policy's business.
func parse(body []byte, tenantClaim string) (*Answer, error) {
	if len(body) > MaxAnswerSize {
		return nil, reason.New(reason.IntrospectionInvalid, "introspection answer over %d bytes", MaxAnswerSize)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var claims map[string]any
	if err := dec.Decode(&claims); err != nil || claims == nil {
		return nil, reason.New(reason.IntrospectionInvalid, "introspection answer is not a JSON object")
	}
	if len(bytes.TrimSpace(body[dec.InputOffset():])) != 0 {
		return nil, reason.New(reason.IntrospectionInvalid, "introspection answer has data after its JSON object")
	}
	active, ok := claims["active"].(bool)
	if !ok {
		return nil, reason.New(reason.IntrospectionInvalid, "introspection answer has no boolean active member")
	}
	if !active {
		return nil, nil
	}
	bearer, err := usableAsBearer(claims)
	if err != nil {
		return nil, err
	}
	if !bearer {
		return nil, nil
	}
	a := &Answer{Claims: claims, Roles: []string{}}
	if a.Subject, err = optionalString(claims, "sub"); err != nil {
		return nil, err
	}
	if a.Tenant, err = optionalString(claims, tenantClaim); err != nil {
		return nil, err
	}
	if a.Exp, err = numericDate(claims, "exp"); err != nil {
		return nil, err
	}
	if a.NotBefore, err = numericDate(claims, "nbf"); err != nil {
		return nil, err
	}
	if a.Roles, err = roles(claims); err != nil {
		return nil, err
	}
	if a.Audiences, err = audiences(claims); err != nil {
		return nil, err
	}
	// Numbers stay json.Number for the checks above; the claims a policy
	// reads hold float64, as a JWT's do.
	for k, v := range claims {
		claims[k] = plain(v)
	}
	return a, nil
}

// usableAsBearer reports whether an active answer is about a token that
// a bearer request may present: not one bound to a key of its client
// (a cnf member, RFC 8705 §3.2 and RFC 9449 §6.2, or token_type DPoP),
// whose proof of possession a bearer request cannot give, and not a
// refresh token (token_type refresh_token), which is for the
// authorization server only. token_type must be a string when present.
func usableAsBearer(claims map[string]any) (bool, error) {
	if cnf, ok := claims["cnf"]; ok && cnf != nil {
		return false, nil
	}
	typ, err := optionalString(claims, "token_type")
	if err != nil {
		return false, err
	}
	return !strings.EqualFold(typ, "DPoP") && !strings.EqualFold(typ, "refresh_token"), nil
}

func optionalString(claims map[string]any, name string) (string, error) {
	v, ok := claims[name]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", reason.New(reason.IntrospectionInvalid, "introspection answer's %s is not a string", name)
	}
	return s, nil
}

// maxNumericDate is the last second of the year 9999.
const maxNumericDate = 253402300799

func numericDate(claims map[string]any, name string) (int64, error) {
	v, ok := claims[name]
	if !ok || v == nil {
		return 0, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, reason.New(reason.IntrospectionInvalid, "introspection answer's %s is not a number", name)
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f > maxNumericDate || math.IsNaN(f) {
		return 0, reason.New(reason.IntrospectionInvalid, "introspection answer's %s is not a NumericDate", name)
	}
	return int64(f), nil
}

// audiences is the aud member: one string or an array of strings (RFC
// 7662 §2.2, as in a JWT), nil when absent.
func audiences(claims map[string]any) ([]string, error) {
	switch v := claims["aud"].(type) {
	case nil:
		return nil, nil
	case string:
		return []string{v}, nil
	case []any:
		out := make([]string, len(v))
		for i, a := range v {
			s, ok := a.(string)
			if !ok {
				return nil, reason.New(reason.IntrospectionInvalid, "introspection answer's aud is not an array of strings")
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, reason.New(reason.IntrospectionInvalid, "introspection answer's aud is neither a string nor an array of strings")
}

// roles is the roles member, an array of strings or one string, or else
// the scope member's space-separated values.
func roles(claims map[string]any) ([]string, error) {
	switch v := claims["roles"].(type) {
	case nil:
	case string:
		if v != "" {
			return []string{v}, nil
		}
		return []string{}, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, r := range v {
			s, ok := r.(string)
			if !ok {
				return nil, reason.New(reason.IntrospectionInvalid, "introspection answer's roles is not an array of strings")
			}
			if s != "" {
				out = append(out, s)
			}
		}
		return out, nil
	default:
		return nil, reason.New(reason.IntrospectionInvalid, "introspection answer's roles is not an array of strings")
	}
	scope, err := optionalString(claims, "scope")
	if err != nil {
		return nil, err
	}
	out := strings.Fields(scope)
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// plain turns the json.Numbers of v into float64, as encoding/json
// decodes them by default.
func plain(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return x.String()
		}
		return f
	case []any:
		for i := range x {
			x[i] = plain(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = plain(x[k])
		}
	}
	return v
}
