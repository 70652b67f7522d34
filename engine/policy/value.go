package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Keys of the input document, built once: terms are immutable values.
var (
	keyAction   = ast.StringTerm("action")
	keyUser     = ast.StringTerm("user")
	keyResource = ast.StringTerm("resource")
	keyTenant   = ast.StringTerm("tenant")
	keyRequest  = ast.StringTerm("request")
	keyID       = ast.StringTerm("id")
	keyRole     = ast.StringTerm("role")
	keyRoles    = ast.StringTerm("roles")
	keyTenantID = ast.StringTerm("tenant_id")
	keyEmail    = ast.StringTerm("email")
	keyClaims   = ast.StringTerm("claims")
	keyType     = ast.StringTerm("type")
	keyPlan     = ast.StringTerm("plan")
	keyMethod   = ast.StringTerm("method")
	keyPath     = ast.StringTerm("path")
	keyHost     = ast.StringTerm("host")
	keyQuery    = ast.StringTerm("query")
	keyHeaders  = ast.StringTerm("headers")
)

// Value converts the input to the AST value the policy sees as input. It
// builds the objects field by field, which costs a fraction of a JSON round
// trip, and yields exactly the document that encoding the input with
// encoding/json would: omitempty fields left out, nil slices and maps as
// null.
func (in *Input) Value() (ast.Value, error) {
	claims, err := claimsValue(in.User.Claims)
	if err != nil {
		return nil, fmt.Errorf("user claims: %w", err)
	}
	n := 16 + len(in.User.Roles)
	if r := in.Request; r != nil {
		n += 8 + 2*len(r.Query) + 2*len(r.Headers)
	}
	b := termBuf{terms: make([]ast.Term, 0, n)}

	u := &in.User
	user := make([][2]*ast.Term, 0, 6)
	user = append(user,
		[2]*ast.Term{keyID, b.str(u.ID)},
		[2]*ast.Term{keyRole, b.str(u.Role)},
		[2]*ast.Term{keyRoles, b.strs(u.Roles)},
		[2]*ast.Term{keyTenantID, b.str(u.TenantID)},
	)
	if u.Email != "" {
		user = append(user, [2]*ast.Term{keyEmail, b.str(u.Email)})
	}
	user = append(user, [2]*ast.Term{keyClaims, b.term(claims)})

	res := make([][2]*ast.Term, 0, 3)
	if in.Resource.Type != "" {
		res = append(res, [2]*ast.Term{keyType, b.str(in.Resource.Type)})
	}
	res = append(res,
		[2]*ast.Term{keyID, b.str(in.Resource.ID)},
		[2]*ast.Term{keyTenant, b.str(in.Resource.Tenant)},
	)

	doc := make([][2]*ast.Term, 0, 5)
	doc = append(doc,
		[2]*ast.Term{keyAction, b.str(in.Action)},
		[2]*ast.Term{keyUser, b.term(ast.NewObject(user...))},
		[2]*ast.Term{keyResource, b.term(ast.NewObject(res...))},
		[2]*ast.Term{keyTenant, b.term(ast.NewObject(
			[2]*ast.Term{keyID, b.str(in.Tenant.ID)},
			[2]*ast.Term{keyPlan, b.str(in.Tenant.Plan)},
		))},
	)
	if in.Request != nil {
		doc = append(doc, [2]*ast.Term{keyRequest, b.term(in.Request.value(&b))})
	}
	return ast.NewObject(doc...), nil
}

func (r *Request) value(b *termBuf) ast.Value {
	items := make([][2]*ast.Term, 0, 5)
	items = append(items,
		[2]*ast.Term{keyMethod, b.str(r.Method)},
		[2]*ast.Term{keyPath, b.str(r.Path)},
	)
	if r.Host != "" {
		items = append(items, [2]*ast.Term{keyHost, b.str(r.Host)})
	}
	if len(r.Query) > 0 {
		items = append(items, [2]*ast.Term{keyQuery, b.strMap(r.Query)})
	}
	if len(r.Headers) > 0 {
		items = append(items, [2]*ast.Term{keyHeaders, b.strMap(r.Headers)})
	}
	return ast.NewObject(items...)
}

// termBuf hands out terms from one allocation. When it runs out it starts
// a new block; terms already handed out stay where they are.
type termBuf struct {
	terms []ast.Term
}

func (b *termBuf) term(v ast.Value) *ast.Term {
	if len(b.terms) == cap(b.terms) {
		b.terms = make([]ast.Term, 0, 8)
	}
	b.terms = append(b.terms, ast.Term{Value: v})
	return &b.terms[len(b.terms)-1]
}

// str converts s, replacing each byte that is not valid UTF-8 with U+FFFD
// as encoding/json does, so that the policy sees what a JSON caller sends.
func (b *termBuf) str(s string) *ast.Term {
	if !utf8.ValidString(s) {
		s = validUTF8(s)
	}
	return b.term(ast.String(s))
}

func validUTF8(s string) string {
	var sb strings.Builder
	sb.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.WriteString(s[i : i+size])
		}
		i += size
	}
	return sb.String()
}

func (b *termBuf) strs(ss []string) *ast.Term {
	if ss == nil {
		return b.term(ast.Null{})
	}
	elems := make([]*ast.Term, len(ss))
	for i, s := range ss {
		elems[i] = b.str(s)
	}
	return b.term(ast.NewArray(elems...))
}

func (b *termBuf) strMap(m map[string]string) *ast.Term {
	items := make([][2]*ast.Term, 0, len(m))
	for k, v := range m {
		items = append(items, [2]*ast.Term{b.str(k), b.str(v)})
	}
	return b.term(ast.NewObject(items...))
}

// claimsValue converts the custom claims; nil is null, as in JSON.
func claimsValue(c map[string]any) (ast.Value, error) {
	if c == nil {
		return ast.Null{}, nil
	}
	return ast.InterfaceToValue(c)
}
