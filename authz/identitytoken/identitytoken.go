// Package identitytoken verifies the identity token the sidecar hands
// the upstream of every allowed request (the X-Svc-Identity header, when
// identity_token is configured) against the sidecar's published keys
// (GET /.well-known/jwks.json). A service behind a proxy that asked the
// sidecar already has its decision: with a Verifier as
// authz.MiddlewareOptions.Identity, the middleware admits a request on
// its token alone, without calling the sidecar.
package identitytoken

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/reason"
)

// Defaults of Options.
const (
	// DefaultRefresh is how long a fetched key set is used before it is
	// fetched again: the sidecar answers with max-age=60.
	DefaultRefresh = time.Minute
	// MinRefetch bounds the fetches a token of an unknown key causes.
	MinRefetch = 5 * time.Second
	// DefaultSkew is the clock skew tolerated on exp, nbf and iat.
	DefaultSkew = 5 * time.Second
)

// Options configures a Verifier.
type Options struct {
	// JWKSURL is the sidecar's key set, such as
	// "http://127.0.0.1:7700/.well-known/jwks.json". Required.
	JWKSURL string
	// Audience is this service as the sidecar names it in aud: the Host
	// the proxy forwards (nginx, Caddy), or the destination's principal
	// Envoy reports (else the Host). Empty accepts any audience, which
	// lets a token minted for another service through: set it.
	Audience string
	// Issuer, when set, must be the iss claim (the sidecar's
	// sdk.service_name, default "svc-sidecar").
	Issuer string
	// HTTPClient fetches the key set; default one with a 5s timeout.
	HTTPClient *http.Client
	// Refresh is how long a key set is used; default DefaultRefresh.
	Refresh time.Duration
	// Skew is the clock skew tolerated; default DefaultSkew.
	Skew time.Duration
}

// Verifier verifies identity tokens. It is safe for concurrent use.
type Verifier struct {
	opts Options

	mu      sync.Mutex
	set     jwk.Set
	fetched time.Time
}

// New makes a Verifier; the key set is fetched on first use.
func New(opts Options) (*Verifier, error) {
	if opts.JWKSURL == "" {
		return nil, errors.New("identitytoken: a JWKS URL is required")
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 5 * time.Second}
	}
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	if opts.Skew <= 0 {
		opts.Skew = DefaultSkew
	}
	return &Verifier{opts: opts}, nil
}

// VerifyIdentity verifies raw, an X-Svc-Identity value, and returns the
// caller it names: Subject and TenantID from sub and tenant_id, DecisionID
// from decision_id (under token reuse, the first decision of the token's
// lifetime), Claims the whole claim set, Reason "ok". A refused token is a
// *reason.Error: token-missing, token-malformed, token-expired,
// token-not-yet-valid, signature-invalid, audience-mismatch,
// issuer-mismatch, or jwks-unavailable when no key set could be had.
func (v *Verifier) VerifyIdentity(ctx context.Context, raw string) (authz.User, error) {
	if raw == "" {
		return authz.User{}, reason.New(reason.TokenMissing, "no identity token")
	}
	set, err := v.keys(ctx, false)
	if err != nil {
		return authz.User{}, err
	}
	tok, err := v.parse(raw, set)
	if err != nil && errors.Is(err, errNoKey) {
		// Perhaps a key the sidecar rotated to since the last fetch.
		if set, ferr := v.keys(ctx, true); ferr == nil {
			tok, err = v.parse(raw, set)
		}
	}
	if err != nil {
		return authz.User{}, classify(err)
	}
	claims := map[string]any{}
	for _, k := range tok.Keys() {
		var val any
		if tok.Get(k, &val) == nil {
			claims[k] = val
		}
	}
	u := authz.User{Claims: claims, Reason: reason.OK}
	u.Subject, _ = tok.Subject()
	u.TenantID, _ = claims["tenant_id"].(string)
	u.DecisionID, _ = claims["decision_id"].(string)
	return u, nil
}

var errNoKey = errors.New("no key of the set verifies the token")

func (v *Verifier) parse(raw string, set jwk.Set) (jwt.Token, error) {
	opts := []jwt.ParseOption{jwt.WithKeySet(set), jwt.WithAcceptableSkew(v.opts.Skew), jwt.WithValidate(true)}
	if v.opts.Audience != "" {
		opts = append(opts, jwt.WithAudience(v.opts.Audience))
	}
	if v.opts.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.opts.Issuer))
	}
	tok, err := jwt.ParseString(raw, opts...)
	if err != nil && !errors.Is(err, jwt.ValidateError()) {
		// Not a validation of claims: the signature or the key.
		return nil, fmt.Errorf("%w: %w", errNoKey, err)
	}
	return tok, err
}

func classify(err error) error {
	switch {
	case errors.Is(err, jwt.TokenExpiredError()):
		return reason.New(reason.TokenExpired, "identity token expired")
	case errors.Is(err, jwt.TokenNotYetValidError()):
		return reason.New(reason.TokenNotYetValid, "identity token not yet valid")
	case errors.Is(err, jwt.InvalidAudienceError()):
		return reason.New(reason.AudienceMismatch, "identity token is for another audience")
	case errors.Is(err, jwt.InvalidIssuerError()):
		return reason.New(reason.IssuerMismatch, "identity token of another issuer")
	case errors.Is(err, jwt.ValidateError()):
		return reason.New(reason.TokenMalformed, "identity token claims do not validate")
	}
	return reason.New(reason.SignatureInvalid, "identity token does not verify against the sidecar's keys")
}

// keys returns the key set, fetched again when it is older than Refresh,
// or (refetch) when it is older than MinRefetch.
func (v *Verifier) keys(ctx context.Context, refetch bool) (jwk.Set, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	age := time.Since(v.fetched)
	if v.set != nil && (age < v.opts.Refresh && !refetch || refetch && age < MinRefetch) {
		return v.set, nil
	}
	set, err := jwk.Fetch(ctx, v.opts.JWKSURL, jwk.WithHTTPClient(v.opts.HTTPClient))
	if err != nil {
		if v.set != nil {
			// The sidecar's keys of a moment ago still verify; try again
			// in MinRefetch.
			v.fetched = time.Now().Add(MinRefetch - v.opts.Refresh)
			return v.set, nil
		}
		return nil, reason.New(reason.JWKSUnavailable, "the sidecar's identity keys could not be fetched")
	}
	v.set, v.fetched = set, time.Now()
	return set, nil
}
