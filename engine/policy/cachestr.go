package policy

import (
	"slices"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Key parts read straight from the typed input's strings: a decision cache
// hit on them converts nothing to AST values.

// leafPart is typedPart for the paths that end at, or run through, one of
// the input's string fields or input.user.roles, read without building a
// value; ok is false for every other path, and for a value that
// conversion would change (invalid UTF-8, null roles).
func leafPart(in *Input, path []*ast.Term) (p keyPart, ok bool) {
	if path[0].Value == keyAction.Value {
		return strPart(1, in.Action)
	}
	if len(path) < 2 {
		return keyPart{}, false
	}
	var (
		s       string
		defined = true
	)
	switch k := path[1].Value; path[0].Value {
	case keyUser.Value:
		switch k {
		case keyID.Value:
			s = in.User.ID
		case keyRole.Value:
			s = in.User.Role
		case keyTenantID.Value:
			s = in.User.TenantID
		case keyEmail.Value:
			s, defined = in.User.Email, in.User.Email != ""
		case keyRoles.Value:
			return strsPart(2, in.User.Roles)
		default:
			return keyPart{}, false
		}
	case keyResource.Value:
		switch k {
		case keyType.Value:
			s, defined = in.Resource.Type, in.Resource.Type != ""
		case keyID.Value:
			s = in.Resource.ID
		case keyTenant.Value:
			s = in.Resource.Tenant
		default:
			return keyPart{}, false
		}
	case keyTenant.Value:
		switch k {
		case keyID.Value:
			s = in.Tenant.ID
		case keyPlan.Value:
			s = in.Tenant.Plan
		default:
			return keyPart{}, false
		}
	case keyRequest.Value:
		r := in.Request
		if r == nil {
			return keyPart{depth: undefinedDepth}, true
		}
		switch k {
		case keyMethod.Value:
			s = r.Method
		case keyPath.Value:
			s = r.Path
		case keyHost.Value:
			s, defined = r.Host, r.Host != ""
		case keySourceIP.Value:
			s, defined = r.SourceIP, r.SourceIP != ""
		default:
			return keyPart{}, false
		}
	default:
		return keyPart{}, false
	}
	if !defined {
		return keyPart{depth: undefinedDepth}, true
	}
	return strPart(2, s)
}

func strPart(depth int, s string) (keyPart, bool) {
	if !utf8.ValidString(s) {
		return keyPart{}, false
	}
	return keyPart{depth: depth, kind: partString, s: s}, true
}

func strsPart(depth int, ss []string) (keyPart, bool) {
	if ss == nil {
		return keyPart{}, false
	}
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return keyPart{}, false
		}
	}
	return keyPart{depth: depth, kind: partStrings, ss: ss}, true
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

// samePart is sameValue on the values of two parts, whatever their kinds.
func samePart(a, b keyPart) bool {
	if a.kind == partValue && b.kind == partValue {
		return sameValue(a.v, b.v)
	}
	if a.kind == partValue {
		a, b = b, a
	}
	switch a.kind {
	case partString:
		switch b.kind {
		case partString:
			return a.s == b.s
		case partValue:
			y, ok := b.v.(ast.String)
			return ok && string(y) == a.s
		}
	case partStrings:
		switch b.kind {
		case partStrings:
			return slices.Equal(a.ss, b.ss)
		case partValue:
			y, ok := b.v.(*ast.Array)
			if !ok || y.Len() != len(a.ss) {
				return false
			}
			for i, s := range a.ss {
				e, ok := y.Elem(i).Value.(ast.String)
				if !ok || string(e) != s {
					return false
				}
			}
			return true
		}
	}
	return false
}
