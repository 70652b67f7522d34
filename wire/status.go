package wire

import "time"

// Values of Status.Status.
const (
	StatusHealthy     = "healthy"
	StatusDegraded    = "degraded"
	StatusUnavailable = "unavailable"
	StatusDraining    = "draining"
)

// Status is the body of GET /v1/status; `core sidecar status` prints it.
type Status struct {
	// Status agrees with readiness (GET /readyz): "healthy" (ready),
	// "degraded" (ready, but the JWKS cannot be refreshed and cached keys
	// are used), "unavailable" (not ready) or "draining" (shutting down).
	Status string `json:"status"`
	// Reason says why Status is not "healthy": the code /readyz gives
	// ("jwks-unavailable", "starting", "draining"), or
	// "saml-idp-metadata-unavailable" for a degraded SAML gateway,
	// "saml-signature-check-disabled" while SVC_ENV=development turns the
	// gateway's signature checks off (ahead of any other degradation),
	// or "policy-bundle-stale" when the active bundle is older than
	// policy.bundle_max_age.
	Reason string `json:"reason,omitempty"`
	// Ready is what GET /readyz answers.
	Ready bool `json:"ready"`
	// Partitioned is true while the JWKS or the bundle server cannot be
	// reached, since PartitionedSince.
	Partitioned      bool       `json:"partitioned"`
	PartitionedSince *time.Time `json:"partitioned_since,omitempty"`
	// LastSync is the older of the last JWKS and bundle syncs.
	LastSync *time.Time `json:"last_sync,omitempty"`
	// CacheValid is true when tokens can be verified with cached keys.
	CacheValid bool `json:"cache_valid"`
	// CacheAge is how long ago LastSync was, as a Go duration.
	CacheAge       string `json:"cache_age,omitempty"`
	PoliciesLoaded int    `json:"policies_loaded"`
	PolicyRevision string `json:"policy_revision"`
	// PolicySource is where the active policy set came from: "config"
	// (policy.dir or the embedded default), "upload", "cache" (the
	// bundle persisted in policy.bundle_cache_dir) or "bundle_url".
	PolicySource string `json:"policy_source"`
	// PolicyCreatedAt is the created_at the active bundle's signed
	// manifest records; absent when the active set is not a bundle or
	// records none.
	PolicyCreatedAt *time.Time `json:"policy_created_at,omitempty"`
	// PolicyHandoverRefused is set when the bundle served before the
	// last restart was refused by this image's configuration (for
	// example a new verification key): the configured policy serves and
	// the status is degraded (policy-handover-refused) until a bundle is
	// activated or the policy directory reloaded.
	PolicyHandoverRefused *HandoverRefusal `json:"policy_handover_refused,omitempty"`
	JWKSKeySets           int              `json:"jwks_key_sets_cached"`
	JWKSKeys              int              `json:"jwks_keys"`
	JWKSLastError         string           `json:"jwks_last_error,omitempty"`
	// JWKSIssuers is each identity provider's JWKS (sdk.jwks_url,
	// jwt.issuer_url, or every [[jwt.issuers]] table); the jwks_* fields
	// above are the one provider's, or with several their sum (the first
	// error, partitioned when one is). Absent in development mode and
	// without a JWKS.
	JWKSIssuers []JWKSIssuer `json:"jwks_issuers,omitempty"`
	DevMode     bool         `json:"dev_mode"`
	// PolicyMode is "enforce", or "dry-run" when policy.mode never denies.
	PolicyMode string `json:"policy_mode"`
	TenantID   string `json:"tenant_id"`
	Uptime     string `json:"uptime"`
	// StartedAt is when this process image started; a restart changes
	// it while the PID stays the same.
	StartedAt time.Time `json:"started_at"`
	PID       int       `json:"pid"`
	Version   string    `json:"version"`
	// Audit is the audit log's counters, absent without an audit log.
	Audit *AuditStats `json:"audit,omitempty"`
	// APIKeys is the state of api_keys.file, absent without it.
	APIKeys *APIKeysStatus `json:"api_keys,omitempty"`
	// DecisionLog is the state of [decision_log], absent without a sink.
	DecisionLog *DecisionLogStatus `json:"decision_log,omitempty"`
	// ClientCerts is the state of [client_certs], absent without it.
	ClientCerts *ClientCertsStatus `json:"client_certs,omitempty"`
	// IdentityToken is the state of the identity tokens handed to
	// upstreams, absent without [identity_token].
	IdentityToken *IdentityTokenStatus `json:"identity_token,omitempty"`
	// Introspection is the state of the introspection client
	// ([introspection]), absent without it.
	Introspection *IntrospectionStatus `json:"introspection,omitempty"`
	// SAML is the SAML gateway's state (IdP metadata, last good copy,
	// whether signatures are checked), present with [sdk.saml].
	SAML *SAMLStatus `json:"saml,omitempty"`
	// OIDC is browser sign-in with OpenID Connect, present with
	// [sdk.oidc].
	OIDC *OIDCStatus `json:"oidc,omitempty"`
	// Bundle is the policy.bundle_url poller's state; absent without it.
	Bundle *BundleStatus `json:"bundle,omitempty"`
	// PolicyState is the record of the last signed bundle accepted, kept
	// in sidecar.state_dir so that a new process refuses an older one
	// (policy-bundle-rollback); absent without a verification key.
	PolicyState *PolicyState `json:"policy_state,omitempty"`
	// RateLimit is the Redis rate limiter's mode: the configured
	// rate_limit.redis_fallback, whether it is in force now (Redis
	// unreachable) and since when; absent without rate_limit.redis_addr.
	RateLimit *RateLimitStatus `json:"rate_limit,omitempty"`
	// Redis is what the Redis of rate_limit.redis_addr says of its
	// memory bound; absent without it.
	Redis *RedisStatus `json:"redis,omitempty"`
}

// RedisStatus is whether the Redis of rate_limit.redis_addr may evict
// the keys the sidecar keeps there (logouts, the SAML replay store,
// used sign-in states, rate-limit budgets) when it is full.
type RedisStatus struct {
	Addr string `json:"addr"`
	// MaxMemoryPolicy and MaxMemory (bytes, 0 for no bound) are the
	// server's maxmemory-policy and maxmemory at CheckedAt.
	MaxMemoryPolicy string `json:"maxmemory_policy,omitempty"`
	MaxMemory       int64  `json:"maxmemory_bytes"`
	// Evicts is true when a bound is set and the policy is not
	// noeviction: the status is then degraded (redis-evicts-keys).
	Evicts    bool       `json:"evicts"`
	CheckedAt *time.Time `json:"checked_at,omitempty"`
	// LastError is the last failed check's error; the answer before it
	// stands.
	LastError string `json:"last_error,omitempty"`
}

// JWKSIssuer is one identity provider's JWKS in Status.
type JWKSIssuer struct {
	// Issuer is the iss of the provider's tokens; "" for sdk.jwks_url
	// without jwt.issuer.
	Issuer string `json:"issuer"`
	// URL is the JWKS endpoint: with discovery, the jwks_uri of the last
	// discovery document read.
	URL     string `json:"jwks_url,omitempty"`
	KeySets int    `json:"jwks_key_sets_cached"`
	Keys    int    `json:"jwks_keys"`
	// LastError is the last fetch's error (of the discovery document or
	// of the keys), absent when it succeeded.
	LastError        string     `json:"jwks_last_error,omitempty"`
	Partitioned      bool       `json:"partitioned"`
	PartitionedSince *time.Time `json:"partitioned_since,omitempty"`
	LastSync         *time.Time `json:"last_sync,omitempty"`
}

// RateLimitStatus is what /v1/status shows of the shared (Redis) rate
// limiter and its fallback.
type RateLimitStatus struct {
	// Mode is rate_limit.redis_fallback: local, allow or deny.
	Mode string `json:"redis_fallback"`
	// Active is true while Redis is unreachable and Mode decides; Since
	// is when that began.
	Active bool       `json:"fallback_active"`
	Since  *time.Time `json:"fallback_since,omitempty"`
	// Replicas divides each budget in local mode.
	Replicas int `json:"replicas"`
	// Fallbacks counts the requests the fallback mode decided since the
	// process started.
	Fallbacks int64 `json:"fallback_decisions"`
}

// HandoverRefusal is why the bundle served before a restart was refused.
type HandoverRefusal struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// PolicyState is the record of the last signed bundle the sidecar
// accepted, which survives a restart.
type PolicyState struct {
	// File is the record's path (the state directory while the
	// verification key cannot be read); empty when no state directory is
	// configured or found, and then a new process forgets the order.
	File string `json:"file"`
	// Revision and CreatedAt are those of the last bundle accepted.
	Revision  string     `json:"revision,omitempty"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
	// LastError is the last failure to read or write the record.
	LastError string `json:"last_error,omitempty"`
}

// AuditStats are the audit log's counters.
type AuditStats struct {
	// Written counts records handed to the destination without error.
	Written uint64 `json:"written"`
	// Dropped counts records discarded because the queue was full, the
	// logger was closed, or Close gave up waiting for them.
	Dropped uint64 `json:"dropped"`
	// Failed counts records lost to write errors of the destination.
	Failed uint64 `json:"failed"`
	// QueueLen is the number of records waiting to be written.
	QueueLen int `json:"queue_len"`
	// QueueCap is the queue's capacity.
	QueueCap int `json:"queue_cap"`
}

// SAMLStatus is what /v1/status shows of the SAML gateway.
type SAMLStatus struct {
	EntityID string `json:"entity_id"`
	ACSURL   string `json:"acs_url"`
	// SignatureCheckDisabled is true under SVC_ENV=development, which
	// only a local trial accepts; the status is then degraded
	// (saml-signature-check-disabled).
	SignatureCheckDisabled bool               `json:"signature_check_disabled"`
	AllowIDPInitiated      bool               `json:"allow_idp_initiated"`
	IDPMetadata            SAMLMetadataStatus `json:"idp_metadata"`
	TokenKeyID             string             `json:"token_key_id"`
	// TokenKeyGenerated is true when no token_signing_key_file is set.
	TokenKeyGenerated bool `json:"token_key_generated"`
	// TokenKeyEphemeral is TokenKeyGenerated outside development mode
	// (SVC_ENV=development): sessions end with the process and do not
	// reach other replicas. `core sidecar status` warns about it.
	TokenKeyEphemeral bool `json:"token_key_ephemeral"`
}

// SAMLMetadataStatus is the state of the IdP metadata the gateway trusts.
type SAMLMetadataStatus struct {
	// Source is the metadata URL or file.
	Source string `json:"source"`
	// EntityID is the IdP's entity id, once loaded.
	EntityID string `json:"entity_id,omitempty"`
	// Loaded is true once a good copy is held.
	Loaded bool `json:"loaded"`
	// Certificates counts the signing certificates trusted.
	Certificates int `json:"certificates"`
	// FetchedAt is when the copy in use was loaded.
	FetchedAt *time.Time `json:"fetched_at,omitempty"`
	// LastAttempt / LastError describe the last fetch that failed; the
	// last good copy keeps serving meanwhile (Stale).
	LastAttempt *time.Time `json:"last_attempt,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	Stale       bool       `json:"stale"`
	// NextRefresh is when the URL is fetched again.
	NextRefresh *time.Time `json:"next_refresh,omitempty"`
}

// BundleStatus is the state of the policy.bundle_url poller.
type BundleStatus struct {
	// URL is policy.bundle_url with credentials redacted.
	URL string `json:"url"`
	// ETag is the ETag of the active bundle as the server gave it.
	ETag string `json:"etag,omitempty"`
	// LastSync is the last time the server answered with the active
	// bundle or 304 Not Modified.
	LastSync *time.Time `json:"last_sync,omitempty"`
	// LastAttempt is the last poll, successful or not.
	LastAttempt *time.Time `json:"last_attempt,omitempty"`
	// Partitioned is true while the server cannot be reached or answers
	// with an error; the last good bundle keeps serving.
	Partitioned      bool       `json:"partitioned"`
	PartitionedSince *time.Time `json:"partitioned_since,omitempty"`
	// LastError says why the last poll failed or its bundle was refused.
	LastError string `json:"last_error,omitempty"`
	// LastErrorCode is the reason code of a refused bundle, as an upload
	// would answer it: bundle-signature-invalid, bundle-malformed,
	// policy-error, policy-builtin-forbidden or revision-older; or
	// bundle-unordered for a bundle without created_at, which only the
	// poller refuses; or bundle-redirect-refused when the server
	// redirected where bundle_url could not point.
	LastErrorCode string `json:"last_error_code,omitempty"`
}

// IntrospectionStatus is the state of the introspection client in
// Status.
type IntrospectionStatus struct {
	// URL is introspection.url.
	URL string `json:"url"`
	// Shared is true when answers are also cached in the Redis of
	// rate_limit.redis_addr, which the replicas share.
	Shared bool `json:"shared"`
	// CacheEntries is the number of answers cached in process.
	CacheEntries int `json:"cache_entries"`
	// Calls counts the calls to the endpoint since the start; Failures
	// those that brought no answer (unreachable, not 200, not an RFC 7662
	// answer).
	Calls    uint64 `json:"calls"`
	Failures uint64 `json:"failures"`
	// LastError is the last failure, absent when none; LastErrorAt when
	// it happened.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}

// APIKeysStatus is the state of api_keys.file in Status.
type APIKeysStatus struct {
	// Path is api_keys.file.
	Path string `json:"path"`
	// Keys is the number of keys in force.
	Keys int `json:"keys"`
	// Loaded is when the keys in force were read.
	Loaded time.Time `json:"loaded"`
	// Refusals counts the changes of the file refused since the start:
	// the previous keys stayed in force.
	Refusals int64 `json:"refusals"`
	// LastError is why the latest change was refused; absent once a
	// change is accepted.
	LastError string `json:"last_error,omitempty"`
}

// DecisionLogStatus is the state of [decision_log] in Status.
type DecisionLogStatus struct {
	// Sink is decision_log.sink ("nats", "kafka", "otlp" or "http").
	Sink string `json:"sink"`
	// Connected is false from a failed send until one succeeds.
	Connected bool `json:"connected"`
	// SpoolBytes is the spool's size on disk.
	SpoolBytes int64 `json:"spool_bytes"`
	// Unsent is the number of records the sink has not acknowledged.
	Unsent int64 `json:"unsent"`
	// OldestUnsentAge is how long the oldest unacknowledged record has
	// waited ("1.5s"); absent when none waits.
	OldestUnsentAge string `json:"oldest_unsent_age,omitempty"`
	// Shipped counts the records the sink acknowledged since the start.
	Shipped int64 `json:"shipped"`
	// Retries counts the failed sends.
	Retries int64 `json:"retries"`
	// Dropped counts the records lost unsent: deleted by a full spool
	// (decision_log.overflow = "drop_oldest"), or found corrupt in the
	// spool at the start and skipped.
	Dropped int64 `json:"dropped"`
	// Refused counts the decisions answered 503 decision-log-unavailable
	// since the start because the spool could not take their records
	// (full under decision_log.overflow = "deny", or not writable).
	Refused int64 `json:"refused"`
	// LastError is why the latest send failed; absent once one succeeds.
	LastError string `json:"last_error,omitempty"`
}

// ClientCertsStatus is the state of [client_certs] in Status.
type ClientCertsStatus struct {
	// TrustDomains is the number of SPIFFE trust domains mapped to a
	// tenant (client_certs.trust_domains).
	TrustDomains int `json:"trust_domains"`
	// Roles is the number of SPIFFE IDs given roles (client_certs.roles).
	Roles int `json:"roles"`
	// Accepted, Invalid and Untrusted count the client certificates
	// judged since the start: accepted, refused as client-cert-invalid,
	// refused as client-cert-untrusted.
	Accepted  int64 `json:"accepted"`
	Invalid   int64 `json:"invalid"`
	Untrusted int64 `json:"untrusted"`
}

// IdentityTokenStatus is the state of the identity tokens
// ([identity_token]) in Status.
type IdentityTokenStatus struct {
	// KeyFile is identity_token.signing_key_file.
	KeyFile string `json:"key_file"`
	// KeyID is the kid of the signing key.
	KeyID string `json:"key_id"`
	// Published is the number of keys at /.well-known/jwks.json.
	Published int `json:"published_keys"`
	// TTL is the lifetime of a token.
	TTL string `json:"ttl"`
	// Loaded is when the key file in force was read.
	Loaded time.Time `json:"loaded"`
	// Minted and Reused count the tokens signed and those served again
	// from the reuse cache since the start; Failures the allowed requests
	// that got no token because signing failed.
	Minted   int64 `json:"minted"`
	Reused   int64 `json:"reused"`
	Failures int64 `json:"failures"`
	// Refusals counts changes of the key file refused since the start.
	Refusals int64 `json:"refusals"`
	// LastError is why the latest change of the key file was refused;
	// empty once a change is accepted.
	LastError string `json:"last_error,omitempty"`
}
