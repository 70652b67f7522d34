package policy

import (
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Key parts read straight from the typed input's strings: a decision cache
// hit on them converts nothing to AST values.

// leafField names the string field (or input.user.roles) a key path ends
// at or runs through, as leafOf finds it once per path: the decision cache
// then reads the field per request without comparing the path's keys.
type leafField uint8

// Leaf fields; leafNone for a path that reaches none.
const (
	leafNone leafField = iota
	leafAction
	leafUserID
	leafUserRole
	leafUserTenantID
	leafUserEmail
	leafUserRoles
	leafResourceType
	leafResourceID
	leafResourceTenant
	leafTenantID
	leafTenantPlan
	leafRequestMethod
	leafRequestPath
	leafRequestHost
	leafRequestSourceIP
	leafRequestCanonicalPath
	leafRequestFormat
	// leafRequestOther is any other path below input.request: undefined
	// when the input has no request, else not a leaf.
	leafRequestOther
)

// leafOf finds the leaf field of a non-empty key path.
func leafOf(path []*ast.Term) leafField {
	if path[0].Value == keyAction.Value {
		return leafAction
	}
	if len(path) < 2 {
		return leafNone
	}
	switch k := path[1].Value; path[0].Value {
	case keyUser.Value:
		switch k {
		case keyID.Value:
			return leafUserID
		case keyRole.Value:
			return leafUserRole
		case keyTenantID.Value:
			return leafUserTenantID
		case keyEmail.Value:
			return leafUserEmail
		case keyRoles.Value:
			return leafUserRoles
		}
	case keyResource.Value:
		switch k {
		case keyType.Value:
			return leafResourceType
		case keyID.Value:
			return leafResourceID
		case keyTenant.Value:
			return leafResourceTenant
		}
	case keyTenant.Value:
		switch k {
		case keyID.Value:
			return leafTenantID
		case keyPlan.Value:
			return leafTenantPlan
		}
	case keyRequest.Value:
		switch k {
		case keyMethod.Value:
			return leafRequestMethod
		case keyPath.Value:
			return leafRequestPath
		case keyHost.Value:
			return leafRequestHost
		case keySourceIP.Value:
			return leafRequestSourceIP
		case keyCanon.Value:
			return leafRequestCanonicalPath
		case keyFormat.Value:
			return leafRequestFormat
		}
		return leafRequestOther
	}
	return leafNone
}

// leafValue is typedPart for the paths that end at, or run through, one
// of the input's string fields or input.user.roles (leaf field f), read
// without building a value, into p; ok is false, and p left alone, for
// every other path (leafNone), and for a value that conversion would
// change (invalid UTF-8, null roles). The part is written in place: a
// part is large, and copies of it cost more than the lookup.
func leafValue(in *Input, f leafField, p *keyPart) (ok bool) {
	var (
		s       string
		defined = true
	)
	switch f {
	case leafNone:
		return false
	case leafAction:
		return strPart(p, 1, in.Action)
	case leafUserID:
		s = in.User.ID
	case leafUserRole:
		s = in.User.Role
	case leafUserTenantID:
		s = in.User.TenantID
	case leafUserEmail:
		s, defined = in.User.Email, in.User.Email != ""
	case leafUserRoles:
		return strsPart(p, 2, in.User.Roles)
	case leafResourceType:
		s, defined = in.Resource.Type, in.Resource.Type != ""
	case leafResourceID:
		s = in.Resource.ID
	case leafResourceTenant:
		s = in.Resource.Tenant
	case leafTenantID:
		s = in.Tenant.ID
	case leafTenantPlan:
		s = in.Tenant.Plan
	default:
		r := in.Request
		if r == nil {
			*p = keyPart{depth: undefinedDepth}
			return true
		}
		switch f {
		case leafRequestMethod:
			s = r.Method
		case leafRequestPath:
			s = r.Path
		case leafRequestHost:
			s, defined = r.Host, r.Host != ""
		case leafRequestSourceIP:
			s, defined = r.SourceIP, r.SourceIP != ""
		case leafRequestCanonicalPath:
			s = r.CanonicalPath
		case leafRequestFormat:
			s = r.Format
		default:
			return false
		}
	}
	if !defined {
		*p = keyPart{depth: undefinedDepth}
		return true
	}
	return strPart(p, 2, s)
}

func strPart(p *keyPart, depth int, s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	*p = keyPart{depth: depth, kind: partString, s: s}
	return true
}

func strsPart(p *keyPart, depth int, ss []string) bool {
	if ss == nil {
		return false
	}
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	*p = keyPart{depth: depth, kind: partStrings, ss: ss}
	return true
}

// materialize sets p.v for the kinds of part that hold their value in
// another form.
func (p *keyPart) materialize() {
	switch p.kind {
	case partString:
		p.v = ast.String(p.s)
	case partStrings:
		terms := make([]*ast.Term, len(p.ss))
		for i, s := range p.ss {
			terms[i] = ast.StringTerm(s)
		}
		p.v = ast.NewArray(terms...)
	}
}
