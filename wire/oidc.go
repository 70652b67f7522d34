package wire

import "time"

// OIDCStatus is what /v1/status shows of browser sign-in with OpenID
// Connect ([sdk.oidc]).
type OIDCStatus struct {
	// PathPrefix is where the endpoints are (sdk.oidc.path_prefix).
	PathPrefix string `json:"path_prefix"`
	// SharedState is true when the key that seals pending sign-ins, the
	// answered states, refresh tokens and back-channel logouts are kept
	// in Redis, which every replica shares.
	SharedState bool `json:"shared_state"`
	// LogoutScope is how far a back-channel logout reaches: "replicas"
	// (through Redis) or "process" (this process only, without Redis).
	LogoutScope string `json:"logout_scope"`
	// TokenKeyID is the kid of the key that signs the session tokens.
	TokenKeyID string `json:"token_key_id"`
	// Providers are the configured providers, [sdk.oidc]'s own first.
	Providers []OIDCProviderStatus `json:"providers"`
}

// OIDCProviderStatus is one provider in OIDCStatus.
type OIDCProviderStatus struct {
	Name      string `json:"name"`
	Tenant    string `json:"tenant,omitempty"`
	IssuerURL string `json:"issuer_url"`
	// Discovered is when the discovery document was last read; absent
	// until a sign-in needed it.
	Discovered *time.Time `json:"discovered,omitempty"`
	// LastError is the last discovery error, absent when it succeeded.
	LastError string `json:"last_error,omitempty"`
	// EndSession is true when the provider has an end_session_endpoint,
	// which logout then sends the browser to (RP-initiated logout).
	EndSession bool `json:"end_session"`
}
