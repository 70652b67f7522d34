// Package token verifies bearer JWTs against keys from a JWKS and caches
// the verified claims.
//
// Verification follows RFC 7515, RFC 7519 and the JWT best current
// practices of RFC 8725: the signature algorithm is fixed by the JWK and
// only RS256, PS256 and ES256 are accepted; a header alg that disagrees
// with the key is refused; jku, x5u, jwk and x5c headers are never
// followed nor used as keys; a crit header is refused; exp is required and
// exp, nbf and iat are checked with a clock skew (30 s by default); the
// tenant claim is required; iss and aud are checked when configured. Every
// failure is a *reason.Error carrying exactly one stable code.
//
// Verified tokens are cached by a 256-bit digest of the whole token
// string (SHA-256 or BLAKE2b-256, whichever this CPU computes faster), so a repeated token skips the signature check; its time claims
// are checked again on every hit and an entry is never served past exp plus the skew,
// nor longer than Options.CacheMaxAge (10 minutes by default) after it was
// verified, however far ahead exp lies. Each entry remembers the kid and
// RFC 7638 thumbprint of the key that verified it, and Retain drops the
// entries of keys the provider withdrew (the engine calls it whenever the
// JWKS changes), so a withdrawn or leaked key stops working at once for
// cached tokens too.
package token

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/reason"
)

// MaxTokenSize is the longest token accepted, in bytes. Longer tokens are
// token-malformed without being decoded.
const MaxTokenSize = 32 << 10

// Defaults applied by New to zero Options fields.
const (
	DefaultSkew        = 30 * time.Second
	DefaultCacheSize   = 100_000
	DefaultTenantClaim = "tenant_id"
	DefaultCacheMaxAge = 10 * time.Minute
)

// MaxSkew is the largest clock skew New accepts.
const MaxSkew = time.Hour

// KeySource returns the verification key a token's kid names. Errors
// should be *reason.Error (jwks.Cache's are); any other error is reported
// as jwks-unavailable.
type KeySource interface {
	Key(ctx context.Context, kid string) (jwks.Key, error)
}

var _ KeySource = (*jwks.Cache)(nil)

// Options configures a Verifier. Only Keys is required.
type Options struct {
	// Keys supplies verification keys, normally a *jwks.Cache.
	Keys KeySource
	// Issuer, when set, must equal the token's iss claim.
	Issuer string
	// Audiences, when set, must contain one of the token's aud values.
	Audiences []string
	// Skew is the clock skew tolerated for exp, nbf and iat. Default 30s.
	Skew time.Duration
	// CacheSize bounds the verified-token cache, in entries (approximately:
	// the bound is spread over shards). Default 100000; negative disables
	// the cache.
	CacheSize int
	// CacheMaxAge caps how long a verified token is served from the cache
	// before it is verified again, whatever its exp. Default 10m.
	CacheMaxAge time.Duration
	// AllowedTyp, when set, lists the JOSE typ header values accepted
	// (RFC 7515 §4.1.9: compared case-insensitively, "application/"
	// optional), e.g. "at+jwt" (RFC 9068) to refuse ID tokens. A token
	// without typ is then refused with reason typ-not-allowed.
	AllowedTyp []string
	// TenantClaim names the required tenant claim. Default "tenant_id".
	TenantClaim string
	// TenantOptional drops the tenant claim rule, for an issuer whose
	// tokens all belong to one tenant the caller sets itself (Derive).
	TenantOptional bool
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Derive, when set, computes a value from a token's claims once per
	// verification; VerifyDerived returns it with the claims, from the
	// cache for as long as the token is cached (never past its exp,
	// CacheMaxAge, or the withdrawal of its key). Derive must not modify
	// the claims, and every request presenting the token shares its value,
	// which must therefore never be modified either.
	Derive func(Claims) any
}

// Claims holds every claim of a verified token as decoded by
// encoding/json with UseNumber: objects are map[string]any, arrays []any,
// and every number (exp, iat and nbf included) is a json.Number, so that
// claims marshal back to JSON exactly as the token carried them. Custom
// claims are untouched.
//
// Claims returned by Verify are shared with the verified-token cache and
// with other callers presenting the same token: they must be treated as
// read-only. Use Clone for a copy that may be modified.
type Claims map[string]any

// Clone returns a deep copy of c.
func (c Claims) Clone() Claims {
	if c == nil {
		return nil
	}
	return cloneValue(map[string]any(c)).(map[string]any)
}

func cloneValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = cloneValue(e)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			s[i] = cloneValue(e)
		}
		return s
	default:
		return v
	}
}

// String returns the claim name as a string, "" when it is absent or not
// a string.
func (c Claims) String(name string) string {
	s, _ := c[name].(string)
	return s
}

// Verifier verifies tokens. It is safe for concurrent use.
type Verifier struct {
	keys        KeySource
	issuer      string
	audiences   map[string]struct{}
	skew        int64 // nanoseconds
	tenantClaim string
	// tenantOptional: no tenant claim is required (Options.TenantOptional).
	tenantOptional bool
	allowedTyp     []string // lower-case, without "application/"
	maxAge         int64    // nanoseconds
	now            func() time.Time
	derive         func(Claims) any // nil: nothing derived
	cache          *cache           // nil when disabled
}

// New validates opts, fills defaults and returns a Verifier.
func New(opts Options) (*Verifier, error) {
	if opts.Keys == nil {
		return nil, errors.New("token: a key source is required")
	}
	switch {
	case opts.Skew == 0:
		opts.Skew = DefaultSkew
	case opts.Skew < 0 || opts.Skew > MaxSkew:
		return nil, fmt.Errorf("token: clock skew %s outside (0, %s]", opts.Skew, MaxSkew)
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.TenantClaim == "" {
		opts.TenantClaim = DefaultTenantClaim
	}
	switch {
	case opts.CacheMaxAge == 0:
		opts.CacheMaxAge = DefaultCacheMaxAge
	case opts.CacheMaxAge < 0:
		return nil, fmt.Errorf("token: negative cache max age %s", opts.CacheMaxAge)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	v := &Verifier{
		keys:           opts.Keys,
		issuer:         opts.Issuer,
		skew:           int64(opts.Skew),
		tenantClaim:    opts.TenantClaim,
		tenantOptional: opts.TenantOptional,
		maxAge:         int64(opts.CacheMaxAge),
		now:            opts.Now,
		derive:         opts.Derive,
	}
	for _, t := range opts.AllowedTyp {
		t = normalizeTyp(t)
		if t == "" {
			return nil, errors.New("token: empty allowed typ")
		}
		v.allowedTyp = append(v.allowedTyp, t)
	}
	if len(opts.Audiences) > 0 {
		v.audiences = make(map[string]struct{}, len(opts.Audiences))
		for _, a := range opts.Audiences {
			if a == "" {
				return nil, errors.New("token: empty audience")
			}
			v.audiences[a] = struct{}{}
		}
	}
	if opts.CacheSize > 0 {
		v.cache = newCache(opts.CacheSize)
	}
	return v, nil
}

// Verify checks raw (the token without the "Bearer " prefix) and returns
// its claims. Every error is a *reason.Error; its message never holds the
// token, key material or a claim value.
func (v *Verifier) Verify(ctx context.Context, raw string) (Claims, error) {
	claims, _, err := v.VerifyDerived(ctx, raw)
	return claims, err
}

// VerifyDerived is Verify, and also returns what Options.Derive computed
// from the claims (nil without Derive, or on error): on a cache hit, the
// value computed when the token was verified.
func (v *Verifier) VerifyDerived(ctx context.Context, raw string) (Claims, any, error) {
	return Chain{v}.VerifyDerived(ctx, raw)
}

// Issuer is the iss the verifier requires (Options.Issuer), "" when any
// is accepted.
func (v *Verifier) Issuer() string { return v.issuer }

// Retain drops the cached tokens whose verifying key holds does not
// accept (by kid and RFC 7638 thumbprint), and returns how many it
// dropped. Call it whenever the key source's keys change; with a
// *jwks.Cache: Options.OnChange calling Retain(cache.Holds). A
// verification running meanwhile is not cached.
func (v *Verifier) Retain(holds func(kid string, thumbprint [sha256.Size]byte) bool) int {
	if v.cache == nil {
		return 0
	}
	return v.cache.retain(holds)
}

// checkTimes applies the exp, nbf and iat rules at now (Unix nanoseconds).
func (v *Verifier) checkTimes(ts times, now int64) error {
	switch {
	case now > ts.exp+v.skew:
		return reason.New(reason.TokenExpired, "token expired")
	case ts.hasNbf && ts.nbf > now+v.skew:
		return reason.New(reason.TokenNotYetValid, "token not valid yet (nbf)")
	case ts.hasIat && ts.iat > now+v.skew:
		return reason.New(reason.TokenIssuedInFuture, "token issued in the future (iat)")
	}
	return nil
}
