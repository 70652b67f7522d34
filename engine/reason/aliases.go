// Package reason re-exports, as aliases, the reason codes that package
// github.com/svc-dev/svc/reason defined when this package was retired.
// The codes live in that leaf package alone; codes added there since are
// not repeated here.
//
// Deprecated: use github.com/svc-dev/svc/reason. This package will be
// removed in the next release.
package reason

import "github.com/svc-dev/svc/reason"

// Code is a stable reason code such as "token-expired".
type Code = reason.Code

// Error is a failure with a stable reason code.
type Error = reason.Error

// Reason codes: see package github.com/svc-dev/svc/reason.
const (
	OK                     = reason.OK
	TokenMissing           = reason.TokenMissing
	TokenMalformed         = reason.TokenMalformed
	TokenExpired           = reason.TokenExpired
	TokenNotYetValid       = reason.TokenNotYetValid
	TokenIssuedInFuture    = reason.TokenIssuedInFuture
	SignatureInvalid       = reason.SignatureInvalid
	UnknownKID             = reason.UnknownKID
	AlgNotAllowed          = reason.AlgNotAllowed
	KeyTooWeak             = reason.KeyTooWeak
	TenantMissing          = reason.TenantMissing
	TenantMismatch         = reason.TenantMismatch
	IssuerMismatch         = reason.IssuerMismatch
	AudienceMismatch       = reason.AudienceMismatch
	TypNotAllowed          = reason.TypNotAllowed
	JWKSUnavailable        = reason.JWKSUnavailable
	FailOpen               = reason.FailOpen
	DevAnonymous           = reason.DevAnonymous
	PolicyAllow            = reason.PolicyAllow
	PolicyDeny             = reason.PolicyDeny
	PolicyError            = reason.PolicyError
	PolicyDryRun           = reason.PolicyDryRun
	InputInvalid           = reason.InputInvalid
	PathInvalid            = reason.PathInvalid
	MethodUntrusted        = reason.MethodUntrusted
	RateLimited            = reason.RateLimited
	Unavailable            = reason.Unavailable
	BundleMalformed        = reason.BundleMalformed
	BundleTooLarge         = reason.BundleTooLarge
	BundleSignatureInvalid = reason.BundleSignatureInvalid
	PolicyBuiltinForbidden = reason.PolicyBuiltinForbidden
)

// New returns an Error with the given code and message.
func New(code Code, format string, args ...any) *Error { return reason.New(code, format, args...) }

// Wrap returns an Error with the given code that wraps err.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return reason.Wrap(code, err, format, args...)
}

// Of returns the reason code carried by err, or def when err carries none.
func Of(err error, def Code) Code { return reason.Of(err, def) }
