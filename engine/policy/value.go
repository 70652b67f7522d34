package policy

import (
	"encoding/json"
	"fmt"
	"reflect"
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
	keySourceIP = ast.StringTerm("source_ip")
	keyCanon    = ast.StringTerm("canonical_path")
	keyFormat   = ast.StringTerm("format")
	keyIdentity = ast.StringTerm("identity")
	keyKind     = ast.StringTerm("kind")
	keyIssuer   = ast.StringTerm("issuer")
	keyAttrs    = ast.StringTerm("attributes")
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
	if _, err := attrsValue(in.Resource.Attributes); err != nil {
		return nil, err
	}
	n := 16 + len(in.User.Roles)
	if r := in.Request; r != nil {
		n += 10 + 2*len(r.Query) + 2*len(r.Headers)
	}
	b := termBuf{terms: make([]ast.Term, 0, n)}
	doc := make([][2]*ast.Term, 0, 5)
	doc = append(doc,
		[2]*ast.Term{keyAction, b.str(in.Action)},
		[2]*ast.Term{keyUser, b.term(in.User.value(&b, claims))},
		[2]*ast.Term{keyResource, b.term(in.Resource.value(&b))},
		[2]*ast.Term{keyTenant, b.term(in.Tenant.value(&b))},
	)
	if in.Request != nil {
		doc = append(doc, [2]*ast.Term{keyRequest, b.term(in.Request.value(&b))})
	}
	if in.Identity != nil {
		idClaims, err := in.identityClaims(claims)
		if err != nil {
			return nil, err
		}
		doc = append(doc, [2]*ast.Term{keyIdentity, b.term(in.Identity.value(&b, idClaims))})
	}
	return ast.NewObject(doc...), nil
}

// identityKeys are the keys of input.identity in the order Value writes
// them.
var identityKeys = [...]*ast.Term{keyKind, keyID, keyTenantID, keyRoles, keyIssuer, keyMethod, keyClaims}

// value is input.identity; claims is the converted Claims.
func (id *Identity) value(b *termBuf, claims ast.Value) ast.Value {
	items := make([][2]*ast.Term, 0, len(identityKeys))
	for _, k := range identityKeys {
		if v := id.field(b, k, claims); v != nil {
			items = append(items, [2]*ast.Term{k, v})
		}
	}
	return ast.NewObject(items...)
}

// identityClaims is the converted Identity.Claims: userClaims (the
// converted User.Claims, nil when not converted yet) when they are the
// user's map, as the engine makes them, else a conversion of their own.
func (in *Input) identityClaims(userClaims ast.Value) (ast.Value, error) {
	ic := in.Identity.Claims
	if userClaims != nil && sameMap(ic, in.User.Claims) {
		return userClaims, nil
	}
	v, err := claimsValue(ic)
	if err != nil {
		return nil, fmt.Errorf("identity claims: %w", err)
	}
	return v, nil
}

// checkClaims fails exactly when Value would: when the user's claims, the
// identity's own, or the resource's attributes cannot be converted. It
// returns the converted user claims when it had to convert them to find
// out, else nil.
func (in *Input) checkClaims() (ast.Value, error) {
	var claims ast.Value
	if !convertible(map[string]any(in.User.Claims)) {
		var err error
		if claims, err = claimsValue(in.User.Claims); err != nil {
			return nil, err
		}
	}
	if id := in.Identity; id != nil && !sameMap(id.Claims, in.User.Claims) && !convertible(map[string]any(id.Claims)) {
		if _, err := claimsValue(id.Claims); err != nil {
			return nil, fmt.Errorf("identity claims: %w", err)
		}
	}
	if a := in.Resource.Attributes; len(a) > 0 && !convertible(map[string]any(a)) {
		if _, err := attrsValue(a); err != nil {
			return nil, err
		}
	}
	return claims, nil
}

// sameMap reports whether a and b are one map (or both nil).
func sameMap(a, b map[string]any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// field is input.identity[key], nil when the document has no such key;
// claims is the converted Claims.
func (id *Identity) field(b *termBuf, key *ast.Term, claims ast.Value) *ast.Term {
	switch key.Value {
	case keyKind.Value:
		return b.str(id.Kind)
	case keyID.Value:
		return b.str(id.ID)
	case keyTenantID.Value:
		return b.str(id.TenantID)
	case keyRoles.Value:
		return b.strs(id.Roles)
	case keyIssuer.Value:
		if id.Issuer != "" {
			return b.str(id.Issuer)
		}
	case keyMethod.Value:
		if id.Method != "" {
			return b.str(id.Method)
		}
	case keyClaims.Value:
		return b.term(claims)
	}
	return nil
}

// userKeys are the keys of input.user in the order Value writes them.
var userKeys = [...]*ast.Term{keyID, keyRole, keyRoles, keyTenantID, keyEmail, keyClaims}

// value is input.user; claims is the converted Claims.
func (u *User) value(b *termBuf, claims ast.Value) ast.Value {
	items := make([][2]*ast.Term, 0, len(userKeys))
	for _, k := range userKeys {
		if v := u.field(b, k, claims); v != nil {
			items = append(items, [2]*ast.Term{k, v})
		}
	}
	return ast.NewObject(items...)
}

// field is input.user[key], nil when the document has no such key;
// claims is the converted Claims.
func (u *User) field(b *termBuf, key *ast.Term, claims ast.Value) *ast.Term {
	switch key.Value {
	case keyID.Value:
		return b.str(u.ID)
	case keyRole.Value:
		return b.str(u.Role)
	case keyRoles.Value:
		return b.strs(u.Roles)
	case keyTenantID.Value:
		return b.str(u.TenantID)
	case keyEmail.Value:
		if u.Email != "" {
			return b.str(u.Email)
		}
	case keyClaims.Value:
		return b.term(claims)
	}
	return nil
}

// resourceKeys are the keys of input.resource in the order Value writes
// them.
var resourceKeys = [...]*ast.Term{keyType, keyID, keyTenant, keyAttrs}

// value is input.resource.
func (r *Resource) value(b *termBuf) ast.Value {
	items := make([][2]*ast.Term, 0, len(resourceKeys))
	for _, k := range resourceKeys {
		if v := r.field(b, k); v != nil {
			items = append(items, [2]*ast.Term{k, v})
		}
	}
	return ast.NewObject(items...)
}

// field is input.resource[key], nil when the document has no such key.
func (r *Resource) field(b *termBuf, key *ast.Term) *ast.Term {
	switch key.Value {
	case keyType.Value:
		if r.Type != "" {
			return b.str(r.Type)
		}
	case keyID.Value:
		return b.str(r.ID)
	case keyTenant.Value:
		return b.str(r.Tenant)
	case keyAttrs.Value:
		if len(r.Attributes) > 0 {
			// Value and checkClaims report attributes that cannot be
			// converted; here they are undefined.
			if v, err := attrsValue(r.Attributes); err == nil {
				return b.term(v)
			}
		}
	}
	return nil
}

// attrsValue converts the resource's attributes (non-empty, or the
// result is null).
func attrsValue(a map[string]any) (ast.Value, error) {
	if len(a) == 0 {
		return ast.Null{}, nil
	}
	v, err := claimsValue(a)
	if err != nil {
		return nil, fmt.Errorf("resource attributes: %w", err)
	}
	return v, nil
}

// value is input.tenant.
func (t *Tenant) value(b *termBuf) ast.Value {
	return ast.NewObject(
		[2]*ast.Term{keyID, t.field(b, keyID)},
		[2]*ast.Term{keyPlan, t.field(b, keyPlan)},
	)
}

// field is input.tenant[key], nil when the document has no such key.
func (t *Tenant) field(b *termBuf, key *ast.Term) *ast.Term {
	switch key.Value {
	case keyID.Value:
		return b.str(t.ID)
	case keyPlan.Value:
		return b.str(t.Plan)
	}
	return nil
}

// requestKeys are the keys of input.request in the order Value writes
// them.
var requestKeys = [...]*ast.Term{keyMethod, keyPath, keyHost, keyQuery, keyHeaders, keySourceIP, keyCanon, keyFormat}

// value is input.request.
func (r *Request) value(b *termBuf) ast.Value {
	items := make([][2]*ast.Term, 0, len(requestKeys))
	for _, k := range requestKeys {
		if v := r.field(b, k); v != nil {
			items = append(items, [2]*ast.Term{k, v})
		}
	}
	return ast.NewObject(items...)
}

// field is input.request[key], nil when the document has no such key.
func (r *Request) field(b *termBuf, key *ast.Term) *ast.Term {
	switch key.Value {
	case keyMethod.Value:
		return b.str(r.Method)
	case keyPath.Value:
		return b.str(r.Path)
	case keyHost.Value:
		if r.Host != "" {
			return b.str(r.Host)
		}
	case keyQuery.Value:
		if len(r.Query) > 0 {
			return b.strMap(r.Query)
		}
	case keyHeaders.Value:
		if len(r.Headers) > 0 {
			return b.strMap(r.Headers)
		}
	case keySourceIP.Value:
		if r.SourceIP != "" {
			return b.str(r.SourceIP)
		}
	case keyCanon.Value:
		return b.str(r.CanonicalPath)
	case keyFormat.Value:
		return b.str(r.Format)
	}
	return nil
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
	v, err := ast.InterfaceToValue(c)
	if err != nil {
		return nil, err
	}
	return v, checkNumbers(v)
}

// checkNumbers rejects numbers that are not JSON numbers: a Go caller's
// json.Number("") or json.Number("x") converts without error but would
// fail deep inside evaluation.
func checkNumbers(v ast.Value) error {
	var bad ast.Number
	found := false
	ast.WalkTerms(v, func(t *ast.Term) bool {
		if n, ok := t.Value.(ast.Number); ok && !found && !jsonNumber(string(n)) {
			bad, found = n, true
		}
		return found
	})
	if found {
		return fmt.Errorf("%q is not a JSON number", string(bad))
	}
	return nil
}

func jsonNumber(s string) bool {
	return s != "" && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) && json.Valid([]byte(s))
}
