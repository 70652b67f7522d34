package reason

// Refusals of the SAML gateway (the sign-in listener's
// <sdk.saml.path_prefix> endpoints): the "error" of the refusal, the
// reason of its audit record and a label of the svc.saml.acs metric, with
// the HTTP status of each in parentheses.
const (
	// SAMLMalformed: not a form post, not base64, not well-formed XML,
	// not a SAML Response of the expected shape (duplicate IDs, a
	// Signature out of place, no Subject or NameID) (400).
	SAMLMalformed Code = "saml-malformed"
	// SAMLTooLarge: the request body is over 1 MiB (samlgw.MaxBodyBytes)
	// (413).
	SAMLTooLarge Code = "saml-too-large"
	// SAMLTooComplex: the document nests too deep or holds too many
	// elements, attributes, namespace declarations or tokens (the ACS
	// bounds); refused from the first scan, before any tree is built
	// (400).
	SAMLTooComplex Code = "saml-too-complex"
	// SAMLDTDForbidden: the document carries a DOCTYPE (DTDs and
	// entities are never processed) (400).
	SAMLDTDForbidden Code = "saml-dtd-forbidden"
	// SAMLSignatureInvalid: no signature over the Response or the
	// Assertion, a signature that does not verify against the IdP's
	// certificates, or a Reference that does not cover the element it is
	// attached to (401).
	SAMLSignatureInvalid Code = "saml-signature-invalid"
	// SAMLAlgorithmNotAllowed: SHA-1 (or an unknown algorithm) in the
	// signature or digest method; an EncryptedAssertion whose key
	// transport is not RSA-OAEP or whose data encryption is not AES-GCM
	// (checked before the SP key is used) (401).
	SAMLAlgorithmNotAllowed Code = "saml-algorithm-not-allowed"
	// SAMLDecryptionFailed: the EncryptedAssertion could not be opened
	// with the SP key. Every failure after the algorithm check (the key
	// transport, the data, the decrypted content) gives this one answer,
	// so that it tells an attacker nothing about where it failed (400).
	SAMLDecryptionFailed Code = "saml-decryption-failed"
	// SAMLUntrustedIssuer: the Issuer is not the IdP's entity id (401).
	SAMLUntrustedIssuer Code = "saml-untrusted-issuer"
	// SAMLAudienceMismatch: no AudienceRestriction names entity_id (401).
	SAMLAudienceMismatch Code = "saml-audience-mismatch"
	// SAMLRecipientMismatch: the Destination or the bearer Recipient is
	// not acs_url (401).
	SAMLRecipientMismatch Code = "saml-recipient-mismatch"
	// SAMLExpired: NotOnOrAfter (Conditions or SubjectConfirmationData)
	// has passed, skew included (401).
	SAMLExpired Code = "saml-expired"
	// SAMLNotYetValid: NotBefore (or IssueInstant) is in the future, skew
	// included (401).
	SAMLNotYetValid Code = "saml-not-yet-valid"
	// SAMLReplayed: the assertion id was accepted before (401).
	SAMLReplayed Code = "saml-replayed"
	// SAMLStatusFailure: the IdP answered with a status other than
	// Success (401).
	SAMLStatusFailure Code = "saml-status-failure"
	// SAMLTenantMissing: the tenant attribute is absent, empty or
	// multi-valued (403).
	SAMLTenantMissing Code = "saml-tenant-missing"
	// SAMLMultipleAssertions: the document holds more than one assertion
	// (400).
	SAMLMultipleAssertions Code = "saml-multiple-assertions"
	// SAMLRequestUnknown: InResponseTo names no AuthnRequest of this
	// gateway (its HMAC does not verify, it is too old, or it was
	// answered), or the Response and the assertion answer different
	// requests (401).
	SAMLRequestUnknown Code = "saml-request-unknown"
	// SAMLRequestNotBound: InResponseTo names a request of this gateway
	// that the posting browser did not start: its request cookie
	// ("__Host-" + cookie_name + "_req" wherever the gateway's cookies
	// are Secure, set by login) does not list it (login CSRF) (401).
	SAMLRequestNotBound Code = "saml-request-not-bound"
	// SAMLUnsolicited: a response without InResponseTo while
	// allow_idp_initiated is false (401).
	SAMLUnsolicited Code = "saml-unsolicited"
	// SAMLNotFound: no endpoint of the gateway at this path (404).
	SAMLNotFound Code = "saml-not-found"
	// SAMLMethodNotAllowed: the endpoint does not take this method (405).
	SAMLMethodNotAllowed Code = "saml-method-not-allowed"
	// SAMLBadReturnTo: login's return_to is not a same-origin relative
	// path (400).
	SAMLBadReturnTo Code = "saml-bad-return-to"
	// SAMLIDPUnavailable: no IdP metadata could be loaded yet (503).
	SAMLIDPUnavailable Code = "saml-idp-unavailable"
	// SAMLStoreUnavailable: the replay store or the shared request key
	// (Redis) could not be reached (503).
	SAMLStoreUnavailable Code = "saml-store-unavailable"
	// SAMLBusy: a bound of the ACS refuses the post for now: its client's
	// work budget or posts under way, its lane's work budget or slots
	// (acs_max_concurrent), or the validation did not end within
	// acs_timeout (503, Retry-After; svc.saml.acs.busy counts which).
	SAMLBusy Code = "saml-busy"
	// SAMLInternal: the gateway failed on its own side (500); never
	// caused by what the client sent.
	SAMLInternal Code = "saml-internal"
)

// SAMLAccepted is the reason of the audit record of an assertion the ACS
// accepted.
const SAMLAccepted Code = "saml-accepted"
