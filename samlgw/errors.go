package samlgw

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/svc-dev/svc/reason"
)

// Code is a stable kebab-case reason for refusing a SAML message: one of
// the SAML codes of package reason (reason.SAMLMalformed and the rest),
// which defines them. Codes are the "error" field of a refusal, the reason
// of its audit record and a label of the svc.saml.acs metric.
type Code = reason.Code

// Refusal codes, by their former names in this package.
//
// Deprecated: use the SAML codes of package reason (reason.SAMLMalformed
// for Malformed, and so on). These names will be removed in the next
// release.
const (
	Malformed           = reason.SAMLMalformed
	TooLarge            = reason.SAMLTooLarge
	TooComplex          = reason.SAMLTooComplex
	DTDForbidden        = reason.SAMLDTDForbidden
	SignatureInvalid    = reason.SAMLSignatureInvalid
	AlgorithmNotAllowed = reason.SAMLAlgorithmNotAllowed
	DecryptionFailed    = reason.SAMLDecryptionFailed
	UntrustedIssuer     = reason.SAMLUntrustedIssuer
	AudienceMismatch    = reason.SAMLAudienceMismatch
	RecipientMismatch   = reason.SAMLRecipientMismatch
	Expired             = reason.SAMLExpired
	NotYetValid         = reason.SAMLNotYetValid
	Replayed            = reason.SAMLReplayed
	StatusFailure       = reason.SAMLStatusFailure
	TenantMissing       = reason.SAMLTenantMissing
	MultipleAssertions  = reason.SAMLMultipleAssertions
	RequestUnknown      = reason.SAMLRequestUnknown
	RequestNotBound     = reason.SAMLRequestNotBound
	Unsolicited         = reason.SAMLUnsolicited
	NotFound            = reason.SAMLNotFound
	MethodNotAllowed    = reason.SAMLMethodNotAllowed
	BadReturnTo         = reason.SAMLBadReturnTo
	IDPUnavailable      = reason.SAMLIDPUnavailable
	StoreUnavailable    = reason.SAMLStoreUnavailable
	Busy                = reason.SAMLBusy
	Internal            = reason.SAMLInternal
)

// status is the HTTP status of a refusal with code c.
func status(c Code) int {
	switch c {
	case reason.SAMLMalformed, reason.SAMLTooComplex, reason.SAMLDTDForbidden, reason.SAMLMultipleAssertions, reason.SAMLBadReturnTo, reason.SAMLDecryptionFailed:
		return http.StatusBadRequest
	case reason.SAMLTooLarge:
		return http.StatusRequestEntityTooLarge
	case reason.SAMLTenantMissing:
		return http.StatusForbidden
	case reason.SAMLNotFound:
		return http.StatusNotFound
	case reason.SAMLMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case reason.SAMLIDPUnavailable, reason.SAMLStoreUnavailable, reason.SAMLBusy:
		return http.StatusServiceUnavailable
	case reason.SAMLInternal:
		return http.StatusInternalServerError
	}
	return http.StatusUnauthorized
}

// Error is a refusal: a code and a message safe to show the client (it
// never holds the assertion, a key or an attribute value).
type Error struct {
	Code Code
	Msg  string
	Err  error
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Msg }

func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error by code, so errors.Is(err, &Error{Code: c}) works.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code && t.Msg == ""
}

func refuse(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of err, reason.SAMLMalformed for an error that
// carries none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return reason.SAMLMalformed
}
