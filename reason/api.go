package reason

// Codes of the sidecar's local HTTP API: the "code" of its JSON error
// envelope, with the HTTP status in parentheses.
const (
	// NotFound: no endpoint of the local API has this path (under /v1/),
	// or the endpoint is off in this configuration (404).
	NotFound Code = "not-found"
	// Internal: the sidecar failed on its own side, such as rendering
	// the identity tokens' key set (500); never caused by what the client
	// sent.
	Internal Code = "internal"
	// FilterInvalid: a stream's filter parameter does not parse; the
	// message gives the position of the problem (400).
	FilterInvalid Code = "filter-invalid"
	// TooManySessions refuses a dry-run session while four already run
	// (409).
	TooManySessions Code = "too-many-sessions"
	// SessionNotFound: no dry-run session has this id (404).
	SessionNotFound Code = "session-not-found"
	// RestartUnsupported refuses a restart of a sidecar embedded without
	// a way to start its next image (501).
	RestartUnsupported Code = "restart-unsupported"
)

// Refusals of the guards in front of the local HTTP API; each closes the
// connection.
const (
	// CrossSiteRequest refuses a request a browser sent from another
	// site (403).
	CrossSiteRequest Code = "cross-site-request"
	// HostNotAllowed refuses a Host header that names neither the
	// listener nor an allowed host (DNS rebinding) (403).
	HostNotAllowed Code = "host-not-allowed"
	// AdminTokenRequired refuses a caller that did not present the admin
	// token: one off loopback, or any caller of the admin endpoints under
	// sidecar.admin_require_token (403).
	AdminTokenRequired Code = "admin-token-required"
)

// Refusals of policy activation: a reload, a restart's handover or a
// poll of policy.bundle_url that does not replace the active policy.
const (
	// SignedBundleRequired refuses a directory reload while
	// policy.bundle_verify_key_file says only signed bundles may replace
	// the policy (409).
	SignedBundleRequired Code = "signed-bundle-required"
	// RevisionOlder refuses a bundle older than the active one (409).
	RevisionOlder Code = "revision-older"
	// BundleUnordered refuses a polled bundle whose signed manifest
	// records no created_at (an opa build bundle, say): it cannot be
	// ordered against the active one, so a replayed old bundle would be
	// activated (422).
	BundleUnordered Code = "bundle-unordered"
	// PolicyBundleStale marks a status degraded because the active
	// bundle's created_at is older than policy.bundle_max_age; with
	// policy.bundle_max_age_action = "refuse" it also refuses to activate
	// such a bundle, so that a replayed old one never becomes the policy
	// (422).
	PolicyBundleStale Code = "policy-bundle-stale"
	// PolicyBundleRollback refuses a signed bundle older than the last
	// one accepted under the same verification key, as recorded in
	// sidecar.state_dir: without the record a process started afresh
	// would take a replayed older bundle served first (409).
	PolicyBundleRollback Code = "policy-bundle-rollback"
	// BundleRedirectRefused is the last_error_code of a poll whose
	// server redirected to plain http off loopback, or too many times.
	BundleRedirectRefused Code = "bundle-redirect-refused"
)

// Reasons of GET /v1/status (its "reason" field, beside the codes above
// that also mark a status degraded) and of GET /readyz.
const (
	// Starting: the sidecar is not serving yet, so not ready (/readyz
	// answers 503).
	Starting Code = "starting"
	// Draining: the sidecar is shutting down or handing over to a new
	// image, so not ready (/readyz answers 503).
	Draining Code = "draining"
	// BundleServerUnreachable marks a status degraded while
	// policy.bundle_url cannot be reached; the last good bundle serves.
	BundleServerUnreachable Code = "bundle-server-unreachable"
	// SAMLIDPMetadataUnavailable marks a status degraded while the SAML
	// IdP metadata cannot be loaded or refreshed; the last good copy, if
	// any, serves.
	SAMLIDPMetadataUnavailable Code = "saml-idp-metadata-unavailable"
	// PolicyHandoverRefused marks a status degraded because the bundle
	// served before a restart was refused by the new image's
	// configuration.
	PolicyHandoverRefused Code = "policy-handover-refused"
	// SAMLSignatureCheckDisabled marks a status degraded while the SAML
	// gateway does not verify signatures (SVC_ENV=development in a local
	// trial), so that a sidecar left that way never reads healthy.
	SAMLSignatureCheckDisabled Code = "saml-signature-check-disabled"
	// APIKeysFileRefused marks a status degraded while the latest change
	// of api_keys.file is refused: the previous keys stay in force, so a
	// key revoked in the file still works until the file is fixed.
	APIKeysFileRefused Code = "api-keys-file-refused"
	// DecisionLogDropped marks a status degraded once a full decision
	// log spool deleted records unsent (decision_log.overflow =
	// "drop_oldest"): the log is no longer complete.
	DecisionLogDropped Code = "decision-log-dropped"
	// RedisEvictsKeys marks a status degraded while the Redis of
	// rate_limit.redis_addr has a maxmemory and a maxmemory-policy other
	// than noeviction: when full it deletes keys the sidecar relies on
	// (logouts, revoked sessions, the SAML replay store, used sign-in
	// states, rate-limit budgets), so a logged-out session could work
	// again and an answered assertion be taken twice.
	RedisEvictsKeys Code = "redis-evicts-keys"
)
