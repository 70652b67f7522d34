package token

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/svc-dev/svc/reason"
)

// Router verifies the tokens of several issuers, each with its own
// verifier: a token goes to the verifier whose Options.Issuer its iss
// claim names, and to no other, so that a key of one issuer never
// verifies a token that claims to come from another. A token whose iss
// names no verifier is refused with reason.IssuerUnknown.
//
// Like Chain, Router hashes a token once and asks every verifier's cache
// before reading iss: a cached entry was verified by its verifier, whose
// issuer rule held for it, so a hit routes the token as iss would have.
// Only a miss pays for decoding the unverified payload's iss, next to
// which the signature check costs far more.
type Router struct {
	all   Chain
	byIss map[string]*Verifier
}

// NewRouter routes tokens to vs by their issuers, which must be set and
// distinct.
func NewRouter(vs ...*Verifier) (*Router, error) {
	r := &Router{byIss: make(map[string]*Verifier, len(vs))}
	for _, v := range vs {
		switch {
		case v.issuer == "":
			return nil, errors.New("token: a routed verifier needs an issuer")
		case r.byIss[v.issuer] != nil:
			return nil, fmt.Errorf("token: two verifiers of issuer %q", v.issuer)
		}
		r.byIss[v.issuer] = v
		r.all = append(r.all, v)
	}
	if len(r.all) == 0 {
		return nil, errors.New("token: a router needs a verifier")
	}
	return r, nil
}

// VerifyDerived verifies raw with the verifier of its issuer and returns
// its claims and what that verifier's Options.Derive computed. Every error
// is a *reason.Error.
func (r *Router) VerifyDerived(ctx context.Context, raw string) (Claims, any, error) {
	d, claims, derived, ok, err := r.all.fromCaches(raw)
	if ok {
		return claims, derived, err
	}
	iss, err := UnverifiedIssuer(raw)
	if err != nil {
		return nil, nil, err
	}
	v := r.byIss[iss]
	if v == nil {
		return nil, nil, reason.New(reason.IssuerUnknown, "the token's issuer is none of the configured issuers")
	}
	return v.verifyDigest(ctx, &d)
}

// UnverifiedIssuer returns the iss claim of raw's payload without
// verifying anything: only to choose which keys verify the token, which
// then checks iss again. A token that is not a compact JWS with a JSON
// payload is reason.TokenMalformed; one without a string iss has the
// issuer "".
func UnverifiedIssuer(raw string) (string, error) {
	if len(raw) > MaxTokenSize {
		return "", reason.New(reason.TokenMalformed, "token exceeds %d bytes", MaxTokenSize)
	}
	_, rest, ok := strings.Cut(raw, ".")
	payload, _, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return "", reason.New(reason.TokenMalformed, "not a compact JWS")
	}
	buf, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return "", reason.New(reason.TokenMalformed, "payload is not base64url")
	}
	// The claims decoder of verification, whose member names are exact
	// (encoding/json would match "ISS" too).
	claims, err := decodeUniqueObject(buf)
	if err != nil {
		return "", reason.New(reason.TokenMalformed, "payload is not a JSON object")
	}
	iss, _ := claims["iss"].(string)
	return iss, nil
}
