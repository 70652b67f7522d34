package token

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws/jwsbb"

	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/reason"
)

var (
	rs256 = jwa.RS256()
	ps256 = jwa.PS256()
	es256 = jwa.ES256()
)

// times are the time claims of a token in Unix nanoseconds.
type times struct {
	exp, nbf, iat  int64
	hasNbf, hasIat bool
}

// verify runs every check on a token that is not in the cache, and
// returns its claims, time claims and the key that verified it.
func (v *Verifier) verify(ctx context.Context, raw string) (Claims, times, jwks.Key, error) {
	var none jwks.Key
	seg, ok := splitCompact(raw)
	if !ok {
		return nil, times{}, none, reason.New(reason.TokenMalformed, "not a compact JWS of three base64url parts")
	}
	h, err := parseHeader(seg.header)
	if err != nil {
		return nil, times{}, none, err
	}
	if v.allowedTyp != nil && !slices.Contains(v.allowedTyp, normalizeTyp(h.typ)) {
		return nil, times{}, none, reason.New(reason.TypNotAllowed, "header typ is not one of jwt.allowed_typ")
	}
	key, err := v.keys.Key(ctx, h.kid)
	if err != nil {
		var re *reason.Error
		if errors.As(err, &re) {
			return nil, times{}, none, re
		}
		return nil, times{}, none, reason.Wrap(reason.JWKSUnavailable, err, "key lookup failed")
	}
	// The algorithm is the key's, never the header's alone (RFC 8725
	// §3.1): a header naming another algorithm is refused.
	if !key.Allows(h.alg) {
		return nil, times{}, none, reason.New(reason.AlgNotAllowed, "header alg %s does not match the key", h.alg)
	}
	if seg.signature == "" {
		return nil, times{}, none, reason.New(reason.SignatureInvalid, "empty signature")
	}
	sig, err := base64.RawURLEncoding.DecodeString(seg.signature)
	if err != nil {
		return nil, times{}, none, reason.New(reason.TokenMalformed, "signature is not base64url")
	}
	// The header was decoded once, above; the signature is checked with
	// jwx's JWS verification primitive under the key's algorithm. The
	// jws.Verify front end would decode the header a second time into
	// typed values, parsing any x5c certificate or jwk the token carries,
	// and more than double the allocations of the whole verification.
	if err := jwsbb.Verify(key.Public, h.alg.String(), unsafeBytes(seg.signingInput), sig); err != nil {
		return nil, times{}, none, reason.New(reason.SignatureInvalid, "signature does not verify")
	}
	// Only an authenticated payload is decoded.
	payload, err := base64.RawURLEncoding.DecodeString(seg.payload)
	if err != nil {
		return nil, times{}, none, reason.New(reason.TokenMalformed, "payload is not base64url")
	}
	claims, err := parseClaims(payload)
	if err != nil {
		return nil, times{}, none, err
	}
	ts, err := claimTimes(claims)
	if err != nil {
		return nil, times{}, none, err
	}
	if err := v.checkTimes(ts, v.now().UnixNano()); err != nil {
		return nil, times{}, none, err
	}
	if err := v.checkClaims(claims); err != nil {
		return nil, times{}, none, err
	}
	return claims, ts, key, nil
}

// segments are the parts of a compact JWS.
type segments struct {
	header, payload, signature string
	// signingInput is header.payload, the bytes the signature covers.
	signingInput string
}

// splitCompact splits raw into exactly three segments, the first two
// non-empty.
func splitCompact(raw string) (segments, bool) {
	i := strings.IndexByte(raw, '.')
	if i <= 0 {
		return segments{}, false
	}
	j := strings.IndexByte(raw[i+1:], '.')
	if j <= 0 {
		return segments{}, false
	}
	j += i + 1
	if strings.IndexByte(raw[j+1:], '.') >= 0 {
		return segments{}, false
	}
	return segments{header: raw[:i], payload: raw[i+1 : j], signature: raw[j+1:], signingInput: raw[:j]}, true
}

// unsafeBytes views s as bytes without a copy, for callees that only read.
func unsafeBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// header is what verification reads from the JOSE header. jku, x5u, jwk
// and x5c are deliberately not read: keys come only from the key source.
type header struct {
	alg jwa.SignatureAlgorithm
	kid string
	typ string
}

// parseHeader decodes the protected header. Member names are matched
// exactly (encoding/json's struct decoding would also match "ALG").
func parseHeader(seg string) (header, error) {
	buf, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return header{}, reason.New(reason.TokenMalformed, "header is not base64url")
	}
	m, err := decodeUniqueObject(buf)
	if errors.Is(err, errDuplicate) {
		return header{}, reason.New(reason.TokenMalformed, "header names a member twice")
	}
	if err != nil {
		return header{}, reason.New(reason.TokenMalformed, "header is not a JSON object")
	}
	if _, ok := m["crit"]; ok {
		return header{}, reason.New(reason.TokenMalformed, "crit header not supported")
	}
	if _, ok := m["b64"]; ok {
		return header{}, reason.New(reason.TokenMalformed, "b64 header not supported")
	}
	var h header
	alg, ok := m["alg"].(string)
	if !ok {
		return header{}, reason.New(reason.TokenMalformed, "header alg missing or not a string")
	}
	switch alg {
	case "RS256":
		h.alg = rs256
	case "PS256":
		h.alg = ps256
	case "ES256":
		h.alg = es256
	default:
		if a, known := jwa.LookupSignatureAlgorithm(alg); known {
			return header{}, reason.New(reason.AlgNotAllowed, "alg %s not allowed (RS256, PS256, ES256 only)", a)
		}
		return header{}, reason.New(reason.AlgNotAllowed, "unsupported alg (RS256, PS256, ES256 only)")
	}
	if kid, ok := m["kid"]; ok {
		if h.kid, ok = kid.(string); !ok {
			return header{}, reason.New(reason.TokenMalformed, "header kid is not a string")
		}
	}
	if typ, ok := m["typ"]; ok {
		if h.typ, ok = typ.(string); !ok {
			return header{}, reason.New(reason.TokenMalformed, "header typ is not a string")
		}
	}
	return h, nil
}

// normalizeTyp puts a typ header value in the form RFC 7515 §4.1.9
// compares: media type names are case-insensitive and "application/" may
// be left out.
func normalizeTyp(typ string) string {
	typ = strings.ToLower(strings.TrimSpace(typ))
	return strings.TrimPrefix(typ, "application/")
}

// parseClaims decodes the payload, keeping numbers as json.Number and
// refusing a member named twice.
func parseClaims(payload []byte) (Claims, error) {
	m, err := decodeUniqueObject(payload)
	if errors.Is(err, errDuplicate) {
		return nil, reason.New(reason.TokenMalformed, "claims name a member twice")
	}
	if err != nil {
		return nil, reason.New(reason.TokenMalformed, "claims are not a JSON object")
	}
	return Claims(m), nil
}

// Bounds of a numeric date, in seconds: far enough for any real token,
// small enough that nanoseconds and skew arithmetic stay within int64.
const (
	maxDate = 1 << 33
	minDate = -maxDate
)

// claimTimes reads exp (required), nbf and iat.
func claimTimes(c Claims) (times, error) {
	var ts times
	exp, ok, err := numericDate(c, "exp")
	if err != nil {
		return ts, err
	}
	if !ok {
		return ts, reason.New(reason.TokenMalformed, "exp required")
	}
	ts.exp = exp
	if ts.nbf, ts.hasNbf, err = numericDate(c, "nbf"); err != nil {
		return ts, err
	}
	if ts.iat, ts.hasIat, err = numericDate(c, "iat"); err != nil {
		return ts, err
	}
	return ts, nil
}

// numericDate reads an RFC 7519 NumericDate (seconds, possibly fractional)
// as Unix nanoseconds, clamped to [minDate, maxDate] seconds.
func numericDate(c Claims, name string) (int64, bool, error) {
	v, ok := c[name]
	if !ok {
		return 0, false, nil
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return 0, true, reason.New(reason.TokenMalformed, "%s is not a number", name)
	}
	if i, err := n.Int64(); err == nil {
		return min(max(i, minDate), maxDate) * 1e9, true, nil
	}
	f, err := n.Float64()
	// Out-of-range values come back as ±Inf with ErrRange and are clamped.
	if (err != nil && !errors.Is(err, strconv.ErrRange)) || math.IsNaN(f) {
		return 0, true, reason.New(reason.TokenMalformed, "%s is not a number", name)
	}
	f = min(max(f, minDate), maxDate)
	return int64(f * 1e9), true, nil
}

// checkClaims applies the issuer, audience and tenant rules.
func (v *Verifier) checkClaims(c Claims) error {
	if v.issuer != "" {
		if iss, _ := c["iss"].(string); iss != v.issuer {
			return reason.New(reason.IssuerMismatch, "issuer does not match")
		}
	}
	if v.audiences != nil && !v.audienceMatches(c["aud"]) {
		return reason.New(reason.AudienceMismatch, "no audience matches")
	}
	if cnf, ok := c["cnf"]; ok && cnf != nil {
		return reason.New(reason.TokenBound, "token bound to a key of its client (cnf): it needs a proof of possession a bearer request does not give")
	}
	if v.tenantOptional {
		return nil
	}
	if t, _ := c[v.tenantClaim].(string); t == "" {
		return reason.New(reason.TenantMissing, "claim %s missing, empty or not a string", v.tenantClaim)
	}
	return nil
}

// audienceMatches accepts aud as one string or an array of strings
// (RFC 7519 §4.1.3).
func (v *Verifier) audienceMatches(aud any) bool {
	switch aud := aud.(type) {
	case string:
		_, ok := v.audiences[aud]
		return ok
	case []any:
		for _, a := range aud {
			if s, ok := a.(string); ok {
				if _, ok := v.audiences[s]; ok {
					return true
				}
			}
		}
	}
	return false
}
