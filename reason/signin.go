package reason

// Refusals of browser sign-in with OpenID Connect (the sign-in listener's
// <sdk.oidc.path_prefix> endpoints): the "error" of the refusal, the
// reason of its audit record and a label of the svc.oidc.signin metric.
const (
	// OIDCStateNotBound: the callback's state is not one this browser
	// started: its state cookie ("__Host-" + cookie_name + "_oidc"
	// wherever the gateway's cookies are Secure, set by login) does not
	// list it (login CSRF, a forged or foreign state).
	OIDCStateNotBound Code = "oidc-state-not-bound"
	// OIDCStateUnknown: the state names no pending sign-in: the one its
	// state cookie entry holds sealed does not open (altered, another
	// state's, sealed under a key the gateway no longer has), it expired
	// (10 minutes), or its state was already answered (a replayed
	// callback).
	OIDCStateUnknown Code = "oidc-state-unknown"
	// OIDCProviderError: the provider answered the callback with an error
	// (the user refused, the provider failed).
	OIDCProviderError Code = "oidc-provider-error"
	// OIDCCodeRefused: the provider's token endpoint refused the code
	// (used before, expired, or a PKCE verifier that does not match).
	OIDCCodeRefused Code = "oidc-code-refused"
	// OIDCIssuerMismatch: the callback's iss (RFC 9207) names another
	// provider than the one the sign-in was started with (a mix-up of
	// two providers), or is missing where the provider's discovery
	// document says it sends one.
	OIDCIssuerMismatch Code = "oidc-issuer-mismatch"
	// OIDCIDTokenInvalid: no ID token, or one that does not verify
	// (signature through the provider's JWKS, issuer, expiry) or names
	// no subject.
	OIDCIDTokenInvalid Code = "oidc-id-token-invalid"
	// OIDCAudienceMismatch: the ID token is for another client (aud does
	// not name client_id, or its azp, required with several audiences,
	// names another client).
	OIDCAudienceMismatch Code = "oidc-audience-mismatch"
	// OIDCNonceMismatch: the ID token's nonce is not the one login sent
	// (a token from another sign-in).
	OIDCNonceMismatch Code = "oidc-nonce-mismatch"
	// OIDCTenantMissing: the ID token names no tenant and the provider
	// serves none, or it names another tenant than its provider's.
	OIDCTenantMissing Code = "oidc-tenant-missing"
	// OIDCBadReturnTo: return_to is not a relative path on this site
	// (an open redirect to another origin).
	OIDCBadReturnTo Code = "oidc-bad-return-to"
	// OIDCUnknownProvider: login names a provider that is not configured.
	OIDCUnknownProvider Code = "oidc-unknown-provider"
	// OIDCProviderUnavailable: the provider's discovery document or keys
	// could not be fetched, the document names an endpoint that is not
	// https, or the token endpoint answered a redirect or, refreshing a
	// session, could not be reached (503).
	OIDCProviderUnavailable Code = "oidc-provider-unavailable"
	// OIDCLogoutTokenInvalid: a back-channel logout token that does not
	// verify, lacks what a logout token must carry (events, sid or sub,
	// iat, no nonce), or was issued more than 5 minutes ago or in the
	// future (iat, give or take jwt.clock_skew).
	OIDCLogoutTokenInvalid Code = "oidc-logout-token-invalid"
	// OIDCLogoutTokenReplayed: a back-channel logout token taken before
	// (its jti, or its claims when it has no jti) was posted again. Its
	// logout is done and nothing is recorded again; the answer is 200,
	// as for the first post (a provider may resend a token), and the
	// code is that of the gateway's log line.
	OIDCLogoutTokenReplayed Code = "oidc-logout-token-replayed"
	// OIDCSessionRevoked: the session was ended by a logout at the
	// gateway, a back-channel logout of its provider, or its provider's
	// refusal to refresh it.
	OIDCSessionRevoked Code = "oidc-session-revoked"
	// OIDCRefreshFailed: the provider refused to refresh the session; the
	// browser signs in again.
	OIDCRefreshFailed Code = "oidc-refresh-failed"
	// OIDCStoreUnavailable: the store of answered states, revocations and
	// refresh tokens, or the shared key that seals pending sign-ins
	// (Redis), could not be reached (503).
	OIDCStoreUnavailable Code = "oidc-store-unavailable"
	// OIDCNotFound: no endpoint at this path (404) or method (405).
	OIDCNotFound Code = "oidc-not-found"
	// OIDCInternal: the gateway failed on its own side (500).
	OIDCInternal Code = "oidc-internal"
)
