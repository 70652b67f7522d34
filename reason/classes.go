package reason

// TokenFailures are the codes for which a bearer token itself was
// refused: its client should get a new one (401, WWW-Authenticate
// Bearer error="invalid_token", RFC 6750 §3.1). Every SDK's middleware
// answers these so; testdata/failures.json lists them for the SDKs'
// own tests.
var TokenFailures = []Code{
	TokenMalformed, TokenExpired, TokenNotYetValid, TokenIssuedInFuture, TokenBound,
	SignatureInvalid, UnknownKID, AlgNotAllowed, KeyTooWeak, TenantMissing,
	IssuerMismatch, IssuerUnknown, AudienceMismatch, TypNotAllowed, TokenInactive,
}

// APIKeyFailures are the codes for which an API key itself was refused:
// 401, challenged in the key's own scheme (ApiKey error="invalid_key").
var APIKeyFailures = []Code{APIKeyMalformed, APIKeyUnknown, APIKeyRevoked, APIKeyExpired}
