package samlgw

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is a stable kebab-case reason for refusing a SAML message. Codes are
// the "error" field of a refusal, the reason of its audit record and a
// label of the svc.saml.acs metric.
type Code string

// Refusal codes.
const (
	// Malformed: not a form post, not base64, not well-formed XML, not a
	// SAML Response of the expected shape (duplicate IDs, a Signature out
	// of place, no Subject or NameID).
	Malformed Code = "saml-malformed"
	// TooLarge: the request body is over MaxBodyBytes.
	TooLarge Code = "saml-too-large"
	// TooComplex: the document nests too deep or holds too many
	// elements, attributes, namespace declarations or tokens (the ACS
	// bounds); refused from the first scan, before any tree is built.
	TooComplex Code = "saml-too-complex"
	// DTDForbidden: the document carries a DOCTYPE (DTDs and entities are
	// never processed).
	DTDForbidden Code = "saml-dtd-forbidden"
	// SignatureInvalid: no signature over the Response or the Assertion, a
	// signature that does not verify against the IdP's certificates, or a
	// Reference that does not cover the element it is attached to.
	SignatureInvalid Code = "saml-signature-invalid"
	// AlgorithmNotAllowed: SHA-1 (or an unknown algorithm) in the signature
	// or digest method; an EncryptedAssertion whose key transport is not
	// RSA-OAEP or whose data encryption is not AES-GCM (checked before the
	// SP key is used).
	AlgorithmNotAllowed Code = "saml-algorithm-not-allowed"
	// DecryptionFailed: the EncryptedAssertion could not be opened with
	// the SP key. Every failure after the algorithm check (the key
	// transport, the data, the decrypted content) gives this one answer,
	// so that it tells an attacker nothing about where it failed.
	DecryptionFailed Code = "saml-decryption-failed"
	// UntrustedIssuer: the Issuer is not the IdP's entity id.
	UntrustedIssuer Code = "saml-untrusted-issuer"
	// AudienceMismatch: no AudienceRestriction names entity_id.
	AudienceMismatch Code = "saml-audience-mismatch"
	// RecipientMismatch: the Destination or the bearer Recipient is not
	// acs_url.
	RecipientMismatch Code = "saml-recipient-mismatch"
	// Expired: NotOnOrAfter (Conditions or SubjectConfirmationData) has
	// passed, skew included.
	Expired Code = "saml-expired"
	// NotYetValid: NotBefore (or IssueInstant) is in the future, skew
	// included.
	NotYetValid Code = "saml-not-yet-valid"
	// Replayed: the assertion id was accepted before.
	Replayed Code = "saml-replayed"
	// StatusFailure: the IdP answered with a status other than Success.
	StatusFailure Code = "saml-status-failure"
	// TenantMissing: the tenant attribute is absent, empty or multi-valued.
	TenantMissing Code = "saml-tenant-missing"
	// MultipleAssertions: the document holds more than one assertion.
	MultipleAssertions Code = "saml-multiple-assertions"
	// RequestUnknown: InResponseTo names no AuthnRequest of this gateway
	// (its HMAC does not verify, it is too old, or it was answered), or
	// the Response and the assertion answer different requests.
	RequestUnknown Code = "saml-request-unknown"
	// RequestNotBound: InResponseTo names a request of this gateway that
	// the posting browser did not start: its request cookie
	// ("__Host-" + cookie_name + "_req" wherever the gateway's cookies are
	// Secure, set by login) does not list it (login CSRF).
	RequestNotBound Code = "saml-request-not-bound"
	// Unsolicited: a response without InResponseTo while
	// allow_idp_initiated is false.
	Unsolicited Code = "saml-unsolicited"
	// NotFound: no endpoint of the gateway at this path (404).
	NotFound Code = "saml-not-found"
	// MethodNotAllowed: the endpoint does not take this method (405).
	MethodNotAllowed Code = "saml-method-not-allowed"
	// BadReturnTo: login's return_to is not a same-origin relative path.
	BadReturnTo Code = "saml-bad-return-to"
	// IDPUnavailable: no IdP metadata could be loaded yet (503).
	IDPUnavailable Code = "saml-idp-unavailable"
	// StoreUnavailable: the replay store or the shared request key
	// (Redis) could not be reached (503).
	StoreUnavailable Code = "saml-store-unavailable"
	// Busy: a bound of the ACS refuses the post for now: its client's
	// work budget or posts under way, its lane's work budget or slots
	// (acs_max_concurrent), or the validation did not end within
	// acs_timeout (503, Retry-After; svc.saml.acs.busy counts which).
	Busy Code = "saml-busy"
	// Internal: the gateway failed on its own side (500); never caused by
	// what the client sent.
	Internal Code = "saml-internal"
)

// status is the HTTP status of a refusal with code c.
func (c Code) status() int {
	switch c {
	case Malformed, TooComplex, DTDForbidden, MultipleAssertions, BadReturnTo, DecryptionFailed:
		return http.StatusBadRequest
	case TooLarge:
		return http.StatusRequestEntityTooLarge
	case TenantMissing:
		return http.StatusForbidden
	case NotFound:
		return http.StatusNotFound
	case MethodNotAllowed:
		return http.StatusMethodNotAllowed
	case IDPUnavailable, StoreUnavailable, Busy:
		return http.StatusServiceUnavailable
	case Internal:
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

// CodeOf returns the code of err, Malformed for an error that carries none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Malformed
}
