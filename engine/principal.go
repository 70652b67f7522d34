package engine

import (
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/engine/token"
)

// principal is a verified identity as the policy input shows it: the
// user (input.user) and the identity with its kind (input.identity),
// which shares the user's roles and claims. It is built once per
// verified token, API key or other credential, shared by every request
// presenting it, and never modified.
type principal struct {
	user     policy.User
	identity policy.Identity
}

// newPrincipal is the principal of user, proved by a credential of kind
// (KindJWT…) that issuer vouched for; method is how a session was signed
// in ("" for other kinds).
func newPrincipal(kind, issuer, method string, user policy.User) *principal {
	p := &principal{user: user}
	p.identity = policy.Identity{
		Kind: kind, ID: user.ID, TenantID: user.TenantID, Roles: user.Roles,
		Issuer: issuer, Method: method, Claims: user.Claims,
	}
	return p
}

// kind is the kind of credential behind p, "" for none.
func (p *principal) kind() string {
	if p == nil {
		return ""
	}
	return p.identity.Kind
}

// principalDeriver is the token.Options.Derive of a verifier of tokens of
// kind (KindJWT or KindSession, with method): the principal of the
// policy input, built once per verified token rather than once per
// request, with the tenant read from tenantClaim ("" for tenant_id) or,
// when tenant is set, that fixed tenant.
func principalDeriver(kind, method, tenantClaim, tenant string) func(token.Claims) any {
	return func(claims token.Claims) any {
		sub, t := identity(claims)
		switch {
		case tenant != "":
			t = tenant
		case tenantClaim != "":
			t, _ = claims[tenantClaim].(string)
		}
		iss, _ := claims["iss"].(string)
		return newPrincipal(kind, iss, method, userFrom(TokenDecision{Claims: claims, Subject: sub, TenantID: t}))
	}
}

// derivedPrincipal is the principal a verifier derived, nil without.
func derivedPrincipal(v any) *principal {
	p, _ := v.(*principal)
	return p
}

// derivedUser is the user of the principal a verifier derived, nil
// without.
func derivedUser(v any) *policy.User {
	if p := derivedPrincipal(v); p != nil {
		return &p.user
	}
	return nil
}
