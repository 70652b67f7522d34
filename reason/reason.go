// Package reason holds the stable, kebab-case reason codes that every
// decision of the engine carries. The same strings are used as metric
// labels, span attributes, audit fields and API responses, so they never
// change once released.
//
// It is a leaf package (standard library only) and the one place a code
// is defined, whichever package answers it: the engine, the edges (envoy,
// the SAML and OIDC gateways), the sidecar's own API, the Rust crate's C
// interface and the Go client of the sidecar (package authz) all import
// it, so the client carries these codes without linking the engine. The
// reference of every code (docs/api.md) is generated from this package's
// constants and their doc comments.
package reason

import (
	"errors"
	"fmt"
)

// Code is a stable reason code such as "token-expired".
type Code string

// Token decision codes (ValidateToken).
const (
	// OK is the reason of a token that verified.
	OK Code = "ok"
	// TokenMissing: the request carries no bearer token.
	TokenMissing Code = "token-missing"
	// TokenMalformed: over 32 KiB, not a compact JWS, not decodable, a crit
	// header, a header or payload that names a member twice, or no exp
	// claim (or an exp, nbf or iat that is not a NumericDate).
	TokenMalformed Code = "token-malformed"
	// TokenExpired: exp has passed (30 s clock skew allowed). A token
	// without exp is token-malformed.
	TokenExpired Code = "token-expired"
	// TokenNotYetValid: nbf is in the future.
	TokenNotYetValid Code = "token-not-yet-valid"
	// TokenIssuedInFuture: iat is in the future.
	TokenIssuedInFuture Code = "token-issued-in-future"
	// TokenBound: the token is bound to a key of its client (a cnf
	// claim: RFC 8705 certificate-bound, RFC 9449 DPoP-bound), and only
	// the client's proof of possession of that key makes it usable,
	// which a bearer request does not give: a stolen bound token must not
	// work as a bearer token.
	TokenBound Code = "token-bound"
	// SignatureInvalid: the signature does not verify with the key its
	// kid names.
	SignatureInvalid Code = "signature-invalid"
	// UnknownKID: no key of the JWKS has the token's kid, even after a
	// refresh.
	UnknownKID Code = "unknown-kid"
	// AlgNotAllowed: alg is not RS256, ES256 or PS256, or the key does not
	// allow it (none and HS* are always refused); also a non-signature key.
	AlgNotAllowed Code = "alg-not-allowed"
	// KeyTooWeak: the key the token names is an RSA key under 2048 bits.
	KeyTooWeak Code = "key-too-weak"
	// TenantMissing: the token has no tenant_id claim.
	TenantMissing Code = "tenant-missing"
	// TenantMismatch: the token's tenant is not one this deployment
	// serves (sdk.tenant_id, sdk.accepted_tenants), or the policy found it
	// is not the resource's.
	TenantMismatch Code = "tenant-mismatch"
	// IssuerMismatch: iss is not jwt.issuer.
	IssuerMismatch Code = "issuer-mismatch"
	// IssuerUnknown: with several identity providers ([[jwt.issuers]]),
	// the token's iss names none of them (or the token carries no iss);
	// or no identity provider of bearer tokens is configured at all (a
	// deployment of API keys only).
	IssuerUnknown Code = "issuer-unknown"
	// AudienceMismatch: aud holds none of jwt.audiences.
	AudienceMismatch Code = "audience-mismatch"
	// TypNotAllowed: the JOSE typ header is not one of jwt.allowed_typ
	// (an ID token where an access token is expected, say).
	TypNotAllowed Code = "typ-not-allowed"
	// JWKSUnavailable: no keys could be fetched yet from the JWKS of
	// sdk.jwks_url (or of the token's issuer: jwt.issuer_url,
	// [[jwt.issuers]]), so no token of it can be verified.
	JWKSUnavailable Code = "jwks-unavailable"
	// FailOpen: the sidecar could not be reached and the client's
	// fail_mode is open, so the request passed as "anonymous".
	FailOpen Code = "fail-open"
	// DevAnonymous: development mode (no identity source: no
	// sdk.jwks_url, no jwt.issuer_url, no [[jwt.issuers]], no [sdk.saml],
	// no api_keys.file, no client_certs.trust_domains, no
	// introspection.url, no [sdk.oidc]) accepted the bearer without
	// verification as "anonymous".
	DevAnonymous Code = "dev-anonymous"
)

// API-key decision codes: the credential was an API key
// (Authorization: ApiKey, or X-Api-Key) checked against api_keys.file.
const (
	// DecisionLogUnavailable: the decision log's spool is full under
	// decision_log.overflow = "deny" (or cannot be written): the
	// decision is not answered rather than answered unlogged (503).
	DecisionLogUnavailable Code = "decision-log-unavailable"
	// APIKeyMalformed: the string presented as an API key is not shaped
	// as one ("svck_", a 12-character base32 id, "_", a 43-character
	// base64url secret). Its own code rather than token-malformed, so
	// that a client that sends a bearer token in the API-key header sees
	// which credential was judged.
	APIKeyMalformed Code = "api-key-malformed"
	// APIKeyUnknown: no key of api_keys.file has the key's id, or the
	// secret does not match its hash; one code for both, so that a
	// caller cannot learn which ids exist.
	APIKeyUnknown Code = "api-key-unknown"
	// APIKeyRevoked: the key matched an entry marked revoked
	// (core api-key revoke).
	APIKeyRevoked Code = "api-key-revoked"
	// APIKeyExpired: the key matched an entry whose expires has passed.
	APIKeyExpired Code = "api-key-expired"
	// ClientCertInvalid: the client certificate the proxy vouched for
	// cannot be read: an X-Forwarded-Client-Cert header that does not
	// parse, a certificate that does not decode, no single SPIFFE ID
	// (spiffe://<trust-domain>/<path>) among its URI SANs, or a
	// certificate and a principal that name different IDs.
	ClientCertInvalid Code = "client-cert-invalid"
	// ClientCertUntrusted: the client certificate's SPIFFE ID is of a
	// trust domain client_certs.trust_domains does not map to a tenant.
	ClientCertUntrusted Code = "client-cert-untrusted"
)

// Introspection decision codes: the bearer was not a JWS and
// [introspection] is configured, so its issuer was asked about it
// (RFC 7662).
const (
	// TokenInactive: the introspection endpoint answered active: false
	// (revoked, expired, or never issued), or an answer about a token no
	// bearer request may present yet or at all: an nbf still ahead, a
	// token bound to its client's key (cnf, token_type DPoP), a refresh
	// token.
	TokenInactive Code = "token-inactive"
	// IntrospectionUnavailable: the introspection endpoint could not be
	// reached or did not answer 200, and no still-valid answer about the
	// token was cached. The token was never judged, so this is an outage
	// like jwks-unavailable: never a prompt for a new token.
	IntrospectionUnavailable Code = "introspection-unavailable"
	// IntrospectionInvalid: the introspection endpoint answered something
	// that is not an RFC 7662 answer (not JSON, over 64 KiB, active not a
	// boolean, a claim of the wrong type). Like
	// introspection-unavailable, the token was never judged.
	IntrospectionInvalid Code = "introspection-invalid"
)

// Policy and serving codes.
const (
	// PolicyAllow is the reason of a decision the policy allowed.
	PolicyAllow Code = "policy-allow"
	// PolicyDeny is the reason of a decision the policy denied; the
	// policy's own deny_reasons explain why.
	PolicyDeny Code = "policy-deny"
	// PolicyError means the engine could not reach a decision (evaluation
	// error, no policy loaded, conflicting rule values).
	PolicyError Code = "policy-error"
	// PolicyDryRun is the reason of a request the policy denied but let
	// through because policy.mode is "dry-run"; the audit record holds
	// the would-be outcome with simulated: true.
	PolicyDryRun Code = "policy-dry-run"
	// InputInvalid means the caller's input could not be used.
	InputInvalid Code = "input-invalid"
	// PathInvalid means a proxied request's path has no single meaning
	// (a ";" path parameter, a backslash, an encoded "/" or backslash, a malformed
	// escape): upstreams would disagree on the resource it names.
	PathInvalid Code = "path-invalid"
	// MethodUntrusted means an HTTP check request does not name the
	// original method in the header only the configured proxy can set
	// (nginx: X_Svc_Method), so the method could be the client's choice.
	MethodUntrusted Code = "method-untrusted"
	// RateLimited means the tenant's request budget is spent.
	RateLimited Code = "rate-limited"
	// Unavailable means the decision service could not be reached.
	Unavailable Code = "unavailable"
	// BundleMalformed means an uploaded policy bundle is not a bundle at
	// all: not a gzipped tar, or an unreadable manifest.
	BundleMalformed Code = "bundle-malformed"
	// BundleTooLarge means a policy bundle is larger than
	// policy.bundle_max_bytes: its archive, a file in it, or its files
	// together beyond 8 times that.
	BundleTooLarge Code = "bundle-too-large"
	// BundleSignatureInvalid means a policy bundle's signature does not
	// verify with the configured key: it is unsigned, signed by another
	// key or algorithm, or a file differs from its signed digest.
	BundleSignatureInvalid Code = "bundle-signature-invalid"
	// PolicyBuiltinForbidden means a policy calls a built-in that reaches
	// the network (http.send, net.lookup_ip_addr) or the process
	// (opa.runtime), which policy.allow_network_builtins leaves off.
	PolicyBuiltinForbidden Code = "policy-builtin-forbidden"
	// PlanConditional is the reason of a resource plan that permits the
	// resources meeting its condition.
	PlanConditional Code = "plan-conditional"
	// PlanUnsupported means the policy uses a construct a resource plan
	// cannot express as a condition on a resource's id, tenant and
	// attributes; the message names the rule and line.
	PlanUnsupported Code = "plan-unsupported"
)

// Error is a failure with a stable reason code. Msg is safe to show to a
// caller: it never holds a token, a key or a claim value.
type Error struct {
	Code Code
	Msg  string
	Err  error
}

// IsAPIKey reports whether c is the refusal of an API key
// (api-key-malformed, -unknown, -revoked, -expired).
func IsAPIKey(c Code) bool {
	switch c {
	case APIKeyMalformed, APIKeyUnknown, APIKeyRevoked, APIKeyExpired:
		return true
	}
	return false
}

// New returns an Error with the given code and message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an Error with the given code that wraps err.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Err: err}
}

// Error implements error as "<code>: <msg>[: <wrapped>]".
func (e *Error) Error() string {
	s := string(e.Code)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the wrapped error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, &reason.Error{Code: reason.TokenExpired}) works.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code
	}
	return false
}

// Unjudged reports whether code says a credential could not be checked
// because a dependency failed (the identity provider's keys, its
// introspection endpoint), rather than that the credential is bad: such a
// refusal is an outage (503), never a prompt to fetch a new token.
func Unjudged(code Code) bool {
	switch code {
	case JWKSUnavailable, IntrospectionUnavailable, IntrospectionInvalid:
		return true
	}
	return false
}

// Of returns the reason code carried by err, or def when err carries none.
func Of(err error, def Code) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return def
}
