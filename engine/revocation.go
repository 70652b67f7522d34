package engine

import (
	"context"
	"sync/atomic"

	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/reason"
)

// SessionRevocation reports whether a verified session token's claims
// name a session that was ended: by a logout at the gateway, or by its
// identity provider (OpenID Connect back-channel logout). An error means
// it could not be known; the token is then accepted, as the revocation
// store is an addition to the token's own short lifetime, not its only
// limit.
type SessionRevocation func(ctx context.Context, claims map[string]any) (bool, error)

// revocable refuses the session tokens a SessionRevocation names; every
// other token passes through. The check runs after the verifier (and its
// cache), on every request, so a revocation takes effect on the next one.
type revocable struct {
	tokenVerifier
	revoked atomic.Pointer[SessionRevocation]
}

func (r *revocable) VerifyDerived(ctx context.Context, raw string) (token.Claims, any, error) {
	claims, derived, err := r.tokenVerifier.VerifyDerived(ctx, raw)
	if err != nil {
		return claims, derived, err
	}
	if f := r.revoked.Load(); f != nil {
		if _, session := claims["idp"]; session {
			if gone, ferr := (*f)(ctx, claims); ferr == nil && gone {
				return nil, nil, reason.New(reason.OIDCSessionRevoked, "the session was ended (a logout, or its identity provider ended it)")
			}
		}
	}
	return claims, derived, nil
}

// SetSessionRevocation installs the check that refuses sessions ended by
// their identity provider (package oidcgw); svc-sidecar installs its
// OpenID Connect gateway's. It takes effect with [sdk.oidc] only, and
// may be called while the engine serves.
func (e *Engine) SetSessionRevocation(f SessionRevocation) {
	if e.revocable != nil && f != nil {
		e.revocable.revoked.Store(&f)
	}
}
