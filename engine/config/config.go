// Package config loads the svc configuration: the svc.toml file (or a YAML
// file of the same shape) overridden by SVC_* environment variables.
//
// Load reads the file strictly (an unknown key is an error naming the full
// key, the file and the line), applies the environment (EnvVars lists the
// variables), fills what is still unset with SetDefaults and checks the
// result with Validate, whose errors name the key and where its value came
// from. Every field below is documented; svc.example.toml at the root of
// the repository shows them all.
package config

import (
	"time"

	"github.com/svc-dev/svc/engine/reqpath"
)

// Config is the whole configuration of the engine and the sidecar.
type Config struct {
	// SDK is the [sdk] table of the spec: the fields shared by the sidecar,
	// the SDKs and the in-process engine.
	SDK SDK `toml:"sdk" yaml:"sdk"`
	// Policy says where the policies come from.
	Policy Policy `toml:"policy" yaml:"policy"`
	// JWT tunes token verification.
	JWT JWT `toml:"jwt" yaml:"jwt"`
	// APIKeys is the API-key identity source.
	APIKeys APIKeys `toml:"api_keys" yaml:"api_keys"`
	// ClientCerts is the client-certificate (mTLS) identity source.
	ClientCerts ClientCerts `toml:"client_certs" yaml:"client_certs"`
	// IdentityToken signs the identity handed to the upstream.
	IdentityToken IdentityToken `toml:"identity_token" yaml:"identity_token"`
	// Introspection is the opaque-token identity source (RFC 7662).
	Introspection Introspection `toml:"introspection" yaml:"introspection"`
	// Tenants maps a tenant id (case-sensitive) to its settings.
	Tenants map[string]Tenant `toml:"tenants" yaml:"tenants"`
	// RateLimit sets per-tenant request budgets.
	RateLimit RateLimit `toml:"rate_limit" yaml:"rate_limit"`
	// Sidecar holds the daemon's own listeners and lifecycle settings.
	Sidecar Sidecar `toml:"sidecar" yaml:"sidecar"`
	// Envoy tunes how proxied requests (Envoy ext_authz and the HTTP
	// check) are matched against the route table sidecar.routes.
	Envoy Envoy `toml:"envoy" yaml:"envoy"`
	// Audit configures the decision audit log.
	Audit Audit `toml:"audit" yaml:"audit"`
	// DecisionLog ships decision records off the sidecar.
	DecisionLog DecisionLog `toml:"decision_log" yaml:"decision_log"`
	// ListFilter says how resource plans render as SQL.
	ListFilter ListFilter `toml:"list_filter" yaml:"list_filter"`
	// Log configures structured logging.
	Log Log `toml:"log" yaml:"log"`

	// Source names where the configuration came from (a file path, or
	// "defaults"); it is not read from the file.
	Source string `toml:"-" yaml:"-"`
	// Overrides maps a config key such as "sdk.jwks_url" to the SVC_*
	// environment variable that set it, so that errors and the live config
	// can say where a value came from. It is not read from the file.
	Overrides map[string]string `toml:"-" yaml:"-"`
	// Lines maps a config key to the line of the file that sets it, so
	// that errors can say "policy.dir (svc.toml:7)" (see Origin). It is
	// not read from the file.
	Lines map[string]int `toml:"-" yaml:"-"`
}

// Fail modes.
const (
	// FailOpen allows requests when the decision service cannot be reached.
	FailOpen = "open"
	// FailClosed denies requests when the decision service cannot be
	// reached.
	FailClosed = "closed"
)

// Proxies of the HTTP check endpoint (sidecar.check_proxy).
const (
	// CheckProxyAuto tells nginx from Caddy by X-Original-URI.
	CheckProxyAuto = "auto"
	// CheckProxyNginx: nginx auth_request, the method in X_Svc_Method.
	CheckProxyNginx = "nginx"
	// CheckProxyForwarded: Caddy forward_auth or Traefik forwardAuth.
	CheckProxyForwarded = "forwarded"
	// CheckProxyEnvoy: only Envoy's http_service checks (/check/envoy/);
	// /check itself refuses every request.
	CheckProxyEnvoy = "envoy"
)

// Policy modes.
const (
	// PolicyModeEnforce denies what the policy denies.
	PolicyModeEnforce = "enforce"
	// PolicyModeDryRun evaluates the policy and records the would-be
	// outcome as simulated, but never denies on policy.
	PolicyModeDryRun = "dry-run"
)

// Values of policy.bundle_max_age_action.
const (
	// BundleMaxAgeDegrade activates a bundle older than
	// policy.bundle_max_age and turns the status degraded.
	BundleMaxAgeDegrade = "degrade"
	// BundleMaxAgeRefuse refuses to activate a bundle older than
	// policy.bundle_max_age.
	BundleMaxAgeRefuse = "refuse"
)

// Audit destinations with a special meaning; anything else is a file path.
const (
	AuditStdout = "stdout"
	AuditStderr = "stderr"
	AuditOff    = "off"
)

// SDK is the [sdk] table.
type SDK struct {
	// SidecarAddr is the gRPC listen address of the sidecar (and the address
	// clients dial). Default "[::1]:50051". Env SVC_SIDECAR_ADDR.
	SidecarAddr string `toml:"sidecar_addr" yaml:"sidecar_addr"`
	// TenantID is the tenant of this deployment. ValidateToken refuses a
	// token of any other tenant (tenant-mismatch) unless AcceptedTenants
	// lists it; empty (with AcceptedTenants empty) means the deployment
	// serves every tenant. In development mode empty means "dev", the
	// tenant of `core dev token`. Env SVC_TENANT_ID.
	TenantID string `toml:"tenant_id" yaml:"tenant_id"`
	// AcceptedTenants lists further tenants (case-sensitive) whose tokens
	// ValidateToken accepts, for a deployment that serves several. Check
	// and Authorize leave tenants to the policy. Env SVC_ACCEPTED_TENANTS
	// (comma-separated).
	AcceptedTenants []string `toml:"accepted_tenants" yaml:"accepted_tenants"`
	// ServiceName becomes the OTel service.name. Default "svc-sidecar".
	// Env SVC_SERVICE_NAME.
	ServiceName string `toml:"service_name" yaml:"service_name"`
	// FailMode is "open" (default) or "closed". "closed" requires an
	// identity source (jwks_url or [sdk.saml]); it does not decide
	// development mode, which only the identity sources do.
	// Env SVC_FAIL_MODE.
	FailMode string `toml:"fail_mode" yaml:"fail_mode"`
	// JWKSURL is the identity provider's JWKS endpoint: https, or http on a
	// loopback host. Empty without [sdk.saml] (no identity source at all)
	// means development mode: every bearer is accepted as "anonymous".
	// Env SVC_JWKS_URL.
	JWKSURL string `toml:"jwks_url" yaml:"jwks_url"`
	// SAML is the optional SAML service-provider configuration (Phase 2).
	SAML *SAML `toml:"saml" yaml:"saml"`
	// OIDC is the optional OpenID Connect relying party (browser sign-in).
	OIDC *OIDC `toml:"oidc" yaml:"oidc"`
	// Session is the session of browser sign-in, SAML or OpenID Connect.
	Session Session `toml:"session" yaml:"session"`
	// DevIssuerDir is the directory of the development issuer's key pair
	// (the one `core dev token` signs with), read in development mode
	// only: tokens with iss "svc-dev" are then verified with it for real,
	// and created there when missing. Empty means svc/dev-issuer in the
	// user's configuration directory (~/.config/svc/dev-issuer).
	// Env SVC_DEV_ISSUER_DIR.
	DevIssuerDir string `toml:"dev_issuer_dir" yaml:"dev_issuer_dir"`
}

// SAML is the [sdk.saml] table. Its presence turns the SAML gateway on:
// svc-sidecar then serves login, ACS, metadata, JWKS and logout on
// sidecar.saml_addr under PathPrefix.
type SAML struct {
	// EntityID is the SP entity id; it must equal the audience configured
	// at the identity provider. It is also the iss and aud of the tokens
	// the gateway issues. Env SVC_SAML_ENTITY_ID.
	EntityID string `toml:"entity_id" yaml:"entity_id"`
	// ACSURL is the assertion consumer service URL; it must equal the
	// single sign-on (reply) URL configured at the identity provider, and
	// every response's Destination and Recipient. Env SVC_SAML_ACS_URL.
	ACSURL string `toml:"acs_url" yaml:"acs_url"`
	// IDPMetadataURL is the identity provider's metadata URL: https, or
	// http on a loopback host, because it carries the IdP's signing keys.
	// Fetched with a timeout and a size cap, refreshed in the background,
	// the last good copy kept while the IdP is unreachable. Exactly one of
	// idp_metadata_url and idp_metadata_file is required.
	// Env SVC_SAML_IDP_METADATA_URL.
	IDPMetadataURL string `toml:"idp_metadata_url" yaml:"idp_metadata_url"`
	// IDPMetadataFile is a downloaded copy of the identity provider's
	// metadata, read at start. Env SVC_SAML_IDP_METADATA_FILE.
	IDPMetadataFile string `toml:"idp_metadata_file" yaml:"idp_metadata_file"`
	// IDPMetadataSigningCertificateFile is a PEM file of one or more
	// certificates (a federation's metadata signer, or the IdP's own):
	// when set, the metadata, from the URL or the file, must carry an
	// enveloped signature on its root element that verifies with one of
	// them (SHA-256 or stronger), and only the signed content is read.
	// Env SVC_SAML_IDP_METADATA_SIGNING_CERTIFICATE_FILE.
	IDPMetadataSigningCertificateFile string `toml:"idp_metadata_signing_certificate_file" yaml:"idp_metadata_signing_certificate_file"`
	// ClockSkewSeconds is the clock difference tolerated while validating
	// an assertion. Default 30 (zero means the default).
	// Env SVC_SAML_CLOCK_SKEW_SECONDS.
	ClockSkewSeconds int `toml:"clock_skew_seconds" yaml:"clock_skew_seconds"`
	// AttributeMapping names the SAML attributes that fill the JWT claims.
	AttributeMapping AttributeMapping `toml:"attribute_mapping" yaml:"attribute_mapping"`
	// SPPrivateKeyFile / SPCertificateFile are PEM files of the SP key pair
	// (signs AuthnRequests, decrypts EncryptedAssertions, published in the
	// metadata). Key material is never inline in the file: the environment
	// variables SVC_SAML_SP_PRIVATE_KEY_PEM / SVC_SAML_SP_CERTIFICATE_PEM
	// may carry the PEM text instead. Env SVC_SAML_SP_PRIVATE_KEY_FILE,
	// SVC_SAML_SP_CERTIFICATE_FILE.
	SPPrivateKeyFile  string `toml:"sp_private_key_file" yaml:"sp_private_key_file"`
	SPCertificateFile string `toml:"sp_certificate_file" yaml:"sp_certificate_file"`
	// SPPrivateKeyPEM / SPCertificatePEM are only ever set from
	// SVC_SAML_SP_PRIVATE_KEY_PEM / SVC_SAML_SP_CERTIFICATE_PEM; they are
	// never read from nor written to a file.
	SPPrivateKeyPEM  string `toml:"-" yaml:"-" json:"-"`
	SPCertificatePEM string `toml:"-" yaml:"-" json:"-"`
	// AllowIDPInitiated accepts unsolicited responses (no InResponseTo).
	// It requires rate_limit.redis_addr, the replay cache replicas and
	// restarts share, except in a local trial: every listener on a
	// loopback address or a Unix socket and no identity source but
	// [sdk.saml] (Config.ProductionSetting). Default false.
	// Env SVC_SAML_ALLOW_IDP_INITIATED.
	AllowIDPInitiated bool `toml:"allow_idp_initiated" yaml:"allow_idp_initiated"`
	// TokenTTL is the lifetime of the JWTs the gateway issues. Default
	// 15m, at most 24h. Env SVC_SAML_TOKEN_TTL.
	TokenTTL Duration `toml:"token_ttl,omitempty" yaml:"token_ttl,omitempty"`
	// TokenSigningKeyFile is an EC P-256 private key (PEM) that signs the
	// issued tokens; replicas share it. Further keys in the file (private
	// or public) still verify, for rotation. Without it a key is generated
	// at start: tokens then do not survive a restart nor reach other
	// replicas. Env SVC_SAML_TOKEN_SIGNING_KEY_FILE.
	TokenSigningKeyFile string `toml:"token_signing_key_file,omitempty" yaml:"token_signing_key_file,omitempty"`
	// CookieName is the session cookie that carries the issued token to
	// browsers; the Envoy and HTTP checks read it when a request has no
	// Authorization header. Wherever the gateway's cookies are Secure
	// (acs_url is not plain http on loopback) it sets __Host-<cookie_name>
	// and __Host-<cookie_name>_req, which no other host can plant, and
	// the checks read __Host-<cookie_name> before <cookie_name>; name it
	// here without the prefix. Default "svc_session". Env
	// SVC_SAML_COOKIE_NAME.
	CookieName string `toml:"cookie_name,omitempty" yaml:"cookie_name,omitempty"`
	// PathPrefix is where the endpoints are mounted. Default "/auth/saml".
	// Env SVC_SAML_PATH_PREFIX.
	PathPrefix string `toml:"path_prefix" yaml:"path_prefix"`
	// BrowserRedirect sends a browser without a valid session (a GET or
	// HEAD preferring text/html, no Authorization header, refused for its
	// token) to PathPrefix+"/login?return_to=<its path>" instead of the
	// 401: a 302 from Envoy and Caddy, a 401 with X-Svc-Login that the
	// shipped nginx.conf turns into the 302. Default true (nil means the
	// default). Env SVC_SAML_BROWSER_REDIRECT.
	BrowserRedirect *bool `toml:"browser_redirect,omitempty" yaml:"browser_redirect,omitempty"`
	// DefaultReturnTo is where login, the ACS and logout send the browser
	// when no return_to (RelayState) names a page: a relative path on this
	// site, under the same rule as return_to. Default "/".
	// Env SVC_SAML_DEFAULT_RETURN_TO.
	DefaultReturnTo string `toml:"default_return_to,omitempty" yaml:"default_return_to,omitempty"`
	// ACSMaxConcurrent caps the responses the ACS validates at once in
	// each of its two lanes (posts of at most 64 KiB, the size of a real
	// IdP response, and larger ones); one more large document is answered
	// 503 saml-busy with Retry-After at once, never queued, so that
	// hostile posts cannot take the CPU from the checks the process also
	// serves (a post of a real response's size, or one with the request
	// cookie of a sign-on the gateway started, waits up to 2 s for a
	// slot). Default half of GOMAXPROCS, at least 1, so that a flood of
	// the costliest documents leaves the checks half the CPU (zero means
	// the default). At most 4096.
	// Env SVC_SAML_ACS_MAX_CONCURRENT.
	ACSMaxConcurrent int `toml:"acs_max_concurrent" yaml:"acs_max_concurrent"`
	// ACSTimeout bounds the validation of one response (parsing,
	// signature, decryption, replay store); past it the work stops and
	// the answer is 503 saml-busy. Default 5s, at most 5m.
	// Env SVC_SAML_ACS_TIMEOUT.
	ACSTimeout Duration `toml:"acs_timeout" yaml:"acs_timeout"`
}

// RedirectsBrowsers reports whether browser_redirect is on (its default).
func (s *SAML) RedirectsBrowsers() bool {
	return s != nil && (s.BrowserRedirect == nil || *s.BrowserRedirect)
}

// AttributeMapping names the SAML attributes that fill JWT claims.
type AttributeMapping struct {
	// Email is the attribute that fills the email claim. Default the
	// standard e-mail-address claim URI.
	Email string `toml:"email" yaml:"email"`
	// Role is the attribute that fills the role claim. Default "role".
	Role string `toml:"role" yaml:"role"`
	// Tenant is the attribute that fills the tenant_id claim. Default
	// "tenant_id".
	Tenant string `toml:"tenant" yaml:"tenant"`
}

// Policy is the [policy] table.
type Policy struct {
	// Dir is the directory of .rego files (and data.json/data.yaml).
	// Empty means the embedded default policy. Env SVC_POLICY_DIR.
	Dir string `toml:"dir" yaml:"dir"`
	// BundleVerifyKeyFile is a PEM public key; when set, only bundles signed
	// by it are accepted. When unset, development mode (no identity
	// source: no sdk.jwks_url, jwt.issuer_url, [[jwt.issuers]] nor
	// [sdk.saml]) accepts any bundle without
	// checking a signature, and any other configuration refuses every
	// bundle. Env SVC_BUNDLE_VERIFY_KEY_FILE.
	BundleVerifyKeyFile string `toml:"bundle_verify_key_file" yaml:"bundle_verify_key_file"`
	// BundleCacheDir is a directory where the active bundle is persisted
	// each time one is activated, so that a restart keeps serving it
	// instead of falling back to Dir or the embedded default. Empty: not
	// persisted. Env SVC_BUNDLE_CACHE_DIR.
	BundleCacheDir string `toml:"bundle_cache_dir" yaml:"bundle_cache_dir"`
	// Mode is "enforce" (default) or "dry-run". In dry-run the policy is
	// evaluated and its outcome recorded with simulated: true, but it
	// never denies a request; authentication and rate limits still apply.
	// Env SVC_POLICY_MODE.
	Mode string `toml:"mode" yaml:"mode"`
	// BundleURL is a control plane's bundle: polled with OPA's bundle
	// service protocol (ETag / If-None-Match), verified with
	// BundleVerifyKeyFile (required with it) and activated atomically.
	// https, or http on a loopback host. Env SVC_BUNDLE_URL.
	BundleURL string `toml:"bundle_url" yaml:"bundle_url"`
	// BundleTokenFile holds a bearer token sent to BundleURL.
	// Env SVC_BUNDLE_TOKEN_FILE.
	BundleTokenFile string `toml:"bundle_token_file" yaml:"bundle_token_file"`
	// BundleMinPoll / BundleMaxPoll bound the jittered interval between
	// two polls of BundleURL. Defaults 60s and 120s.
	BundleMinPoll Duration `toml:"bundle_min_poll" yaml:"bundle_min_poll"`
	BundleMaxPoll Duration `toml:"bundle_max_poll" yaml:"bundle_max_poll"`
	// BundleMaxAge, when positive, is the oldest the active bundle may be,
	// by the created_at its signed manifest records: past it, the status
	// turns degraded (policy-bundle-stale), since a control plane should
	// have published a newer one; BundleMaxAgeAction says whether such a
	// bundle is activated at all. 0 (default) turns the check off.
	// Env SVC_BUNDLE_MAX_AGE.
	BundleMaxAge Duration `toml:"bundle_max_age" yaml:"bundle_max_age"`
	// BundleMaxAgeAction is what BundleMaxAge does to a bundle older than
	// it: "degrade" (default) activates it and turns the status degraded;
	// "refuse" also refuses to activate it (policy-bundle-stale), whether
	// uploaded, polled, read back from BundleCacheDir or handed over by a
	// restart, so that a replayed old bundle never becomes the policy. A
	// bundle that ages past BundleMaxAge while active keeps serving,
	// degraded, either way. "refuse" requires BundleMaxAge.
	// Env SVC_BUNDLE_MAX_AGE_ACTION.
	BundleMaxAgeAction string `toml:"bundle_max_age_action" yaml:"bundle_max_age_action"`
	// AllowNetworkBuiltins lets policies call the built-ins that reach the
	// network or the process (http.send, net.lookup_ip_addr, opa.runtime),
	// and fetch a JSON schema's remote $ref. Off by default: a policy
	// calling one does not compile (policy-builtin-forbidden), whether it
	// comes from Dir, an upload, BundleURL or a dry-run candidate.
	// Env SVC_POLICY_ALLOW_NETWORK_BUILTINS.
	AllowNetworkBuiltins bool `toml:"allow_network_builtins" yaml:"allow_network_builtins"`
	// DryRunEvalTimeout bounds each evaluation of a dry-run candidate;
	// one that takes longer is cut off and counted in the session's
	// timeouts. Default 50ms, at most 10s.
	// Env SVC_POLICY_DRY_RUN_EVAL_TIMEOUT.
	DryRunEvalTimeout Duration `toml:"dry_run_eval_timeout" yaml:"dry_run_eval_timeout"`
	// BundleMaxBytes bounds a policy bundle: its compressed archive
	// (uploaded, polled from BundleURL, read back from BundleCacheDir or
	// sent as a dry-run candidate) and each file inside it; all its files
	// together may unpack to 8 times as much. A larger bundle is refused
	// (bundle-too-large). Default 33554432 (32 MiB), at least 1 MiB, at
	// most 1 GiB. Env SVC_POLICY_BUNDLE_MAX_BYTES.
	BundleMaxBytes int64 `toml:"bundle_max_bytes" yaml:"bundle_max_bytes"`
	// DecisionCacheSize bounds the decision cache of each policy set
	// (entries, about 250 bytes each on the default policy): decisions
	// the policy has already made for inputs alike in every part it reads
	// are answered without evaluating. Room for a decision per tenant and
	// a few per user keeps a per-tenant policy's decisions flat as the
	// tenants grow. Takes effect with the next policy activation. Default
	// 32768, at least 16, at most 4194304.
	// Env SVC_POLICY_DECISION_CACHE_SIZE.
	DecisionCacheSize int `toml:"decision_cache_size" yaml:"decision_cache_size"`
}

// JWT is the [jwt] table.
type JWT struct {
	// Issuer, when set, must equal the token's iss. Env SVC_JWT_ISSUER.
	Issuer string `toml:"issuer" yaml:"issuer"`
	// IssuerURL is an OpenID Connect provider's issuer: its keys are found
	// through the discovery document at the issuer URL followed by
	// /.well-known/openid-configuration, whose issuer must equal it
	// exactly, and tokens must carry it as iss. An identity source
	// instead of sdk.jwks_url; jwt.issuer, when set beside it, must equal
	// it. https, or http on a loopback host. See docs/oidc.md.
	// Env SVC_JWT_ISSUER_URL.
	IssuerURL string `toml:"issuer_url" yaml:"issuer_url"`
	// Issuers lists several identity providers ([[jwt.issuers]]); a token
	// is verified by the one its iss names, with that provider's keys
	// alone. An identity source instead of sdk.jwks_url, jwt.issuer_url
	// and jwt.issuer. A list of tables: no environment variable.
	Issuers []JWTIssuer `toml:"issuers" yaml:"issuers"`
	// Audiences, when set, must contain one of the token's aud values,
	// and of an introspection answer's. Env SVC_JWT_AUDIENCES
	// (comma-separated).
	Audiences []string `toml:"audiences" yaml:"audiences"`
	// ClockSkew tolerated for exp/nbf/iat. Default 30s.
	ClockSkew Duration `toml:"clock_skew" yaml:"clock_skew"`
	// CacheSize bounds the verified-token cache (entries). Default 20000 (about 1–2 KB each).
	CacheSize int `toml:"cache_size" yaml:"cache_size"`
	// CacheMaxAge caps how long a verified token is served from the cache,
	// whatever its exp; after it the token is verified again against the
	// current keys. Default 10m. Env SVC_JWT_CACHE_MAX_AGE.
	CacheMaxAge Duration `toml:"cache_max_age" yaml:"cache_max_age"`
	// AllowedTyp, when set, lists the JOSE typ header values accepted
	// (e.g. "at+jwt" of RFC 9068, which ID tokens do not carry); compared
	// case-insensitively, "application/" optional. A token without typ is
	// then refused. Env SVC_JWT_ALLOWED_TYP (comma-separated).
	AllowedTyp []string `toml:"allowed_typ" yaml:"allowed_typ"`
	// JWKSFetchTimeout bounds one JWKS fetch. Default 5s.
	JWKSFetchTimeout Duration `toml:"jwks_fetch_timeout" yaml:"jwks_fetch_timeout"`
	// JWKSMinRefresh / JWKSMaxRefresh bound the background refresh interval
	// derived from Cache-Control. Defaults 1m and 1h.
	JWKSMinRefresh Duration `toml:"jwks_min_refresh" yaml:"jwks_min_refresh"`
	JWKSMaxRefresh Duration `toml:"jwks_max_refresh" yaml:"jwks_max_refresh"`
}

// JWTIssuer is one [[jwt.issuers]] table: an identity provider whose
// tokens the sidecar accepts.
type JWTIssuer struct {
	// IssuerURL is the provider's OpenID Connect issuer, its keys found by
	// discovery as for jwt.issuer_url. Set it, or issuer and jwks_url.
	// [[jwt.issuers]] is a list of tables, which no environment variable
	// sets; see docs/oidc.md.
	IssuerURL string `toml:"issuer_url" yaml:"issuer_url"`
	// Issuer is the iss of the provider's tokens, with jwks_url instead
	// of issuer_url.
	Issuer string `toml:"issuer" yaml:"issuer"`
	// JWKSURL is the provider's JWKS endpoint, with issuer: https, or http
	// on a loopback host.
	JWKSURL string `toml:"jwks_url" yaml:"jwks_url"`
	// Audiences, when set, must contain one of the token's aud values.
	// Default jwt.audiences.
	Audiences []string `toml:"audiences" yaml:"audiences"`
	// TenantClaim names the claim that carries the tenant, required in
	// every token of the provider. Default "tenant_id".
	TenantClaim string `toml:"tenant_claim" yaml:"tenant_claim"`
	// Tenant, when set, is the tenant of every token of the provider,
	// which then needs no tenant claim; not with tenant_claim.
	Tenant string `toml:"tenant" yaml:"tenant"`
}

// Iss is the iss the issuer's tokens carry: IssuerURL, or else Issuer.
func (i JWTIssuer) Iss() string {
	if i.IssuerURL != "" {
		return i.IssuerURL
	}
	return i.Issuer
}

// Tenant is one [tenants.<id>] table.
type Tenant struct {
	// Plan is exposed to policies as input.tenant.plan.
	Plan string `toml:"plan" yaml:"plan"`
}

// RateLimit is the [rate_limit] table.
type RateLimit struct {
	// DefaultRPM is the per-tenant budget in requests per minute when the
	// tenant has no entry. Default 1000 (zero means the default).
	// Env SVC_RATE_LIMIT_DEFAULT_RPM.
	DefaultRPM int `toml:"default_rpm" yaml:"default_rpm"`
	// PerTenant maps a tenant id (case-sensitive) to its budget in requests
	// per minute; 0 means unlimited for that tenant.
	PerTenant map[string]int `toml:"per_tenant" yaml:"per_tenant"`
	// Disabled turns rate limiting off.
	Disabled bool `toml:"disabled" yaml:"disabled"`
	// RedisAddr (host:port), when set, shares budgets across replicas
	// through Redis. Env SVC_REDIS_ADDR.
	RedisAddr string `toml:"redis_addr" yaml:"redis_addr"`
	// RedisTimeout bounds each rate-limit call to Redis; past it the
	// request passes uncounted. Connections to Redis (the SAML replay
	// cache's too) wait at least this long, and at least 250 ms, to
	// dial, read and write. Default 50ms. Env SVC_REDIS_TIMEOUT.
	RedisTimeout Duration `toml:"redis_timeout" yaml:"redis_timeout"`
	// RedisFallback says how requests are limited while Redis cannot be
	// reached: "local" (the default) limits each tenant in memory at its
	// budget divided by Replicas until Redis answers again; "allow" lets
	// requests pass uncounted; "deny" refuses them (rate-limited).
	// Env SVC_RATE_LIMIT_REDIS_FALLBACK.
	RedisFallback string `toml:"redis_fallback" yaml:"redis_fallback"`
	// Replicas is the number of sidecar replicas sharing the Redis
	// budgets; in local fallback each replica allows 1/Replicas of a
	// tenant's budget. Default 1. Env SVC_RATE_LIMIT_REPLICAS.
	Replicas int `toml:"replicas" yaml:"replicas"`
	// RedisTLS connects to Redis over TLS (1.2 or later), the server's
	// certificate verified against the system's authorities or those of
	// RedisTLSCAFile, for the name of RedisAddr's host. Env
	// SVC_REDIS_TLS.
	RedisTLS bool `toml:"redis_tls" yaml:"redis_tls"`
	// RedisTLSCAFile holds PEM certificates of the authorities Redis's
	// certificate is verified against instead of the system's (a
	// private CA); it needs RedisTLS. Env SVC_REDIS_TLS_CA_FILE.
	RedisTLSCAFile string `toml:"redis_tls_ca_file" yaml:"redis_tls_ca_file"`
	// RedisUsername is the Redis ACL user (Redis 6 and later); empty for
	// the default user. Env SVC_REDIS_USERNAME.
	RedisUsername string `toml:"redis_username" yaml:"redis_username"`
	// RedisPasswordFile holds the password of RedisUsername (or of the
	// default user: requirepass), read at startup, one trailing newline
	// ignored; never inline. Env SVC_REDIS_PASSWORD_FILE.
	RedisPasswordFile string `toml:"redis_password_file" yaml:"redis_password_file"`
}

// Sidecar is the [sidecar] table.
type Sidecar struct {
	// HTTPAddr is the local HTTP API listen address. Default
	// "127.0.0.1:7700". Env SVC_HTTP_ADDR.
	HTTPAddr string `toml:"http_addr" yaml:"http_addr"`
	// AdminTokenFile holds a bearer token that lets non-loopback callers
	// use mutating endpoints. Env SVC_ADMIN_TOKEN_FILE.
	AdminTokenFile string `toml:"admin_token_file" yaml:"admin_token_file"`
	// AdminRequireToken requires the admin token of AdminTokenFile from
	// every caller of the guarded endpoints, loopback and Unix socket
	// callers included: on a shared host any local user or process
	// could otherwise administer the sidecar. Requires AdminTokenFile.
	// Default false. Env SVC_ADMIN_REQUIRE_TOKEN.
	AdminRequireToken bool `toml:"admin_require_token" yaml:"admin_require_token"`
	// DrainTimeout bounds graceful shutdown. Default 30s.
	DrainTimeout Duration `toml:"drain_timeout" yaml:"drain_timeout"`
	// PublicRead lets any caller use the read endpoints (status, config,
	// validate-token, authorize, streams) without the admin token when
	// the HTTP listener is not on loopback. Default false: off loopback,
	// reads need the admin token like mutating endpoints do.
	// Env SVC_PUBLIC_READ.
	PublicRead bool `toml:"public_read" yaml:"public_read"`
	// TLSCertFile and TLSKeyFile are a PEM certificate chain and its
	// private key; when both are set, the gRPC and HTTP listeners serve
	// TLS. The files are read again when they change. Env
	// SVC_TLS_CERT_FILE, SVC_TLS_KEY_FILE.
	TLSCertFile string `toml:"tls_cert_file" yaml:"tls_cert_file"`
	TLSKeyFile  string `toml:"tls_key_file" yaml:"tls_key_file"`
	// TLSClientCAFile is a PEM bundle of CA certificates; when set, both
	// listeners require a client certificate issued by one of them
	// (mutual TLS). Requires TLSCertFile. Env SVC_TLS_CLIENT_CA_FILE.
	TLSClientCAFile string `toml:"tls_client_ca_file" yaml:"tls_client_ca_file"`
	// SocketMode is the file mode of Unix domain sockets the sidecar
	// listens on (sdk.sidecar_addr or http_addr of the form
	// unix:///path), as an octal string. Default "0660". Env
	// SVC_SOCKET_MODE.
	SocketMode string `toml:"socket_mode" yaml:"socket_mode"`
	// AllowedHosts are extra host names accepted in the Host header of
	// loopback callers, besides IP literals, "localhost" and the listen
	// host; any other name is refused as a DNS-rebinding attempt.
	AllowedHosts []string `toml:"allowed_hosts" yaml:"allowed_hosts"`
	// CheckProxy names the proxy in front of the HTTP check endpoint
	// (/check), and so the only headers trusted to name the original
	// request: "nginx" (X-Original-URI, and the method in X_Svc_Method,
	// a name nginx drops from clients), "forwarded" (Caddy, Traefik:
	// X-Forwarded-Uri, X-Forwarded-Method), "envoy" (only Envoy's
	// http_service, on /check/envoy/: /check refuses every request) or
	// "auto" (default: nginx's when X-Original-URI is present, else the
	// forwarded headers). The method header is required (nginx without
	// it: 400 method-untrusted); X-Original-Method is never read, since a
	// client can send it through nginx, and two method headers that
	// disagree are refused. Env SVC_CHECK_PROXY.
	CheckProxy string `toml:"check_proxy" yaml:"check_proxy"`
	// TrustForwardedFor lets policies see the client's X-Forwarded-For,
	// Forwarded and X-Real-IP headers in input.request.headers. Leave it
	// false unless every path to the sidecar goes through a proxy that
	// overwrites them. Env SVC_TRUST_FORWARDED_FOR.
	TrustForwardedFor bool `toml:"trust_forwarded_for" yaml:"trust_forwarded_for"`
	// StateDir is where the sidecar keeps what must survive a restart
	// without policy.bundle_cache_dir: the revision and created_at of the
	// last signed bundle accepted under each verification key, so that a
	// new process refuses an older one (policy-bundle-rollback). Empty
	// means $STATE_DIRECTORY (systemd's StateDirectory=), else
	// $XDG_STATE_HOME/svc, else /var/lib/svc when that directory exists;
	// with none of them nothing is recorded. Env SVC_STATE_DIR.
	StateDir string `toml:"state_dir" yaml:"state_dir"`
	// TrustedProxies lists the peers (CIDRs such as "10.0.0.0/8", or
	// single addresses) allowed to name the client of a post to the SAML
	// ACS: from one of them the client is the address in X-Real-IP, or
	// else the last X-Forwarded-For hop; from any other peer those headers
	// are ignored and the peer is the client. The ACS keeps its work
	// budgets per client, so behind a proxy that is not listed every user
	// shares the proxy's budget, and one flooding client starves them all.
	// They are also the only peers whose X-Forwarded-Client-Cert header an
	// HTTP check reads ([client_certs]); from any other peer it is ignored.
	// Default empty. Env SVC_TRUSTED_PROXIES (comma-separated).
	TrustedProxies []string `toml:"trusted_proxies" yaml:"trusted_proxies"`
	// SAMLAddr is the listen address of the SAML gateway, served only when
	// [sdk.saml] is configured. Default "127.0.0.1:7701". Env SVC_SAML_ADDR.
	SAMLAddr string `toml:"saml_addr,omitempty" yaml:"saml_addr,omitempty"`
	// SigninAddr is the listen address of browser sign-in (the SAML
	// gateway and the OpenID Connect relying party), served only when
	// [sdk.saml] or [sdk.oidc] is configured; sidecar.saml_addr is its
	// older name (setting both is an error). Default "127.0.0.1:7701".
	// Env SVC_SIGNIN_ADDR.
	SigninAddr string `toml:"signin_addr" yaml:"signin_addr"`
	// Routes map request paths to resources and actions for the Envoy and
	// HTTP check paths, tried in order.
	Routes []Route `toml:"routes" yaml:"routes"`
}

// Envoy is the [envoy] table: how a proxied request meets the route table
// (sidecar.routes).
type Envoy struct {
	// RoutesCaseSensitive matches the literal segments of route templates
	// case-sensitively. Default false: "/api/reports/{id}/export" also
	// matches ".../Export" and ".../EXPORT", as Express, ASP.NET Core and
	// other case-insensitive routers serve them. Set it only when every
	// upstream routes case-sensitively; a request that then differs from a
	// route only in case is refused (path-invalid) rather than mapped by
	// the default rule. Env SVC_ENVOY_ROUTES_CASE_SENSITIVE.
	RoutesCaseSensitive bool `toml:"routes_case_sensitive" yaml:"routes_case_sensitive"`
	// FormatSuffixes are the response formats a path's last segment may
	// name with a suffix ("json" for "/reports/export.json"), written in
	// lower case without the dot. Routers such as Rails serve such a
	// path as the one without the suffix, so the route table, the default
	// mapping and input.request.canonical_path cut a listed suffix off
	// (its name goes to input.request.format), whatever its letter case.
	// A suffix not listed stays part of the segment:
	// "/users/alice@example.com" and "/releases/1.2.3" keep their last
	// segment whole. Default json, xml, csv, html, txt, yaml; [] cuts
	// none. Env SVC_ENVOY_FORMAT_SUFFIXES (comma-separated).
	FormatSuffixes []string `toml:"format_suffixes" yaml:"format_suffixes"`
}

// Formats returns the format suffixes in effect: FormatSuffixes, or
// reqpath.DefaultFormats when it is not set (nil; an empty list cuts
// none).
func (e Envoy) Formats() []string {
	if e.FormatSuffixes == nil {
		return reqpath.DefaultFormats
	}
	return e.FormatSuffixes
}

// Route maps a path template such as "/api/{resource}/{id}" to an action.
type Route struct {
	// Path is a template; {resource} and {id} capture segments.
	Path string `toml:"path" yaml:"path"`
	// Methods restricts the route to these HTTP methods (empty: all).
	Methods []string `toml:"methods" yaml:"methods"`
	// Resource overrides the captured resource type.
	Resource string `toml:"resource" yaml:"resource"`
	// Action overrides the derived "<resource>:<verb>" action.
	Action string `toml:"action" yaml:"action"`
}

// APIKeys is the [api_keys] table.
type APIKeys struct {
	// File is the API-key file: [[keys]] entries holding the SHA-256 of
	// each key (never the key) and the tenant, subject and roles it
	// stands for, written by `core api-key create`. Setting it makes API
	// keys an identity source (development mode is off). The sidecar
	// re-reads it when it changes; a changed file that does not parse is
	// refused and the previous keys stay in force, but a bad file at the
	// start refuses the start. Env SVC_API_KEYS_FILE.
	File string `toml:"file" yaml:"file"`
}

// ClientCerts is the [client_certs] table: callers identified by the
// client certificate a proxy verified (Envoy's Check attributes, or an
// X-Forwarded-Client-Cert header from a peer of sidecar.trusted_proxies),
// by its SPIFFE ID. The certificate identifies a caller that presents no
// other credential: a bearer token or API key is judged first.
type ClientCerts struct {
	// TrustDomains maps a SPIFFE trust domain ("acme.example") to the
	// tenant of its workloads; an ID of another trust domain is refused
	// (client-cert-untrusted). Setting it makes client certificates an
	// identity source (development mode is off). No SVC_* variable.
	TrustDomains map[string]string `toml:"trust_domains" yaml:"trust_domains"`
	// Roles maps a SPIFFE ID ("spiffe://acme.example/ns/x/sa/y") to the
	// roles of the policy input's user; an ID without an entry has none,
	// and the policy may still decide on input.user.id. Each ID's trust
	// domain must be in trust_domains. No SVC_* variable.
	Roles map[string][]string `toml:"roles" yaml:"roles"`
}

// Introspection is the [introspection] table: opaque access tokens
// checked by asking their issuer (RFC 7662 token introspection).
type Introspection struct {
	// URL is the introspection endpoint (https; http only on a loopback
	// host). Setting it makes introspection an identity source
	// (development mode is off): a bearer that is not a JWS (three
	// base64url parts joined by dots) is posted to it. Env
	// SVC_INTROSPECTION_URL.
	URL string `toml:"url" yaml:"url"`
	// ClientID authenticates svc to the endpoint (client_secret_basic).
	// Env SVC_INTROSPECTION_CLIENT_ID.
	ClientID string `toml:"client_id" yaml:"client_id"`
	// ClientSecretFile holds the client secret, read at the start (one
	// line; whitespace around it ignored); the secret is never inline in the
	// configuration nor logged. Env SVC_INTROSPECTION_CLIENT_SECRET_FILE.
	ClientSecretFile string `toml:"client_secret_file" yaml:"client_secret_file"`
	// TenantClaim names the member of an active answer that holds the
	// tenant. Default "tenant_id". Env SVC_INTROSPECTION_TENANT_CLAIM.
	TenantClaim string `toml:"tenant_claim" yaml:"tenant_claim"`
	// CacheTTL is how long an active answer is reused without asking
	// again, in process and (with rate_limit.redis_addr) in the Redis
	// the replicas share; never past the token's exp. Default "5m". Env
	// SVC_INTROSPECTION_CACHE_TTL.
	CacheTTL Duration `toml:"cache_ttl" yaml:"cache_ttl"`
	// NegativeCacheTTL is how long an inactive answer is reused.
	// Default "10s". Env SVC_INTROSPECTION_NEGATIVE_CACHE_TTL.
	NegativeCacheTTL Duration `toml:"negative_cache_ttl" yaml:"negative_cache_ttl"`
}

// Audit is the [audit] table.
type Audit struct {
	// Destination is "stdout" (default), "stderr", "off", or a file path.
	// An empty destination means the default, so "off" is how the audit
	// log is turned off. Env SVC_AUDIT_DESTINATION.
	Destination string `toml:"destination" yaml:"destination"`
	// QueueSize bounds records waiting to be written. Default 4096.
	QueueSize int `toml:"queue_size" yaml:"queue_size"`
	// MaxSizeMB rotates a file destination when it would grow past this
	// many megabytes; the rotated file keeps a timestamp in its name.
	// 0 (default) never rotates. Env SVC_AUDIT_MAX_SIZE_MB.
	MaxSizeMB int `toml:"max_size_mb" yaml:"max_size_mb"`
	// MaxBackups is how many rotated files are kept (oldest removed
	// first); 0 (default) keeps them all. Env SVC_AUDIT_MAX_BACKUPS.
	MaxBackups int `toml:"max_backups" yaml:"max_backups"`
}

// Log is the [log] table.
type Log struct {
	// Level is trace, debug, info (default), warn or error. Env SVC_LOG_LEVEL.
	Level string `toml:"level" yaml:"level"`
}

// Duration is a time.Duration written as a Go duration string ("30s").
// Negative durations are rejected when decoding.
type Duration struct{ time.Duration }

// TenantPlan returns the plan configured for tenant id under [tenants], or
// "" when the tenant has no entry. Tenant ids are case-sensitive.
func (c Config) TenantPlan(id string) string {
	return c.Tenants[id].Plan
}

// RateLimitFor returns the budget of tenant in requests per minute: its
// rate_limit.per_tenant entry when there is one, else rate_limit.default_rpm
// (DefaultRPM when that is still zero). It does not look at
// RateLimit.Disabled; callers that honor it check it themselves.
func (c Config) RateLimitFor(tenant string) int {
	if rpm, ok := c.RateLimit.PerTenant[tenant]; ok {
		return rpm
	}
	if c.RateLimit.DefaultRPM == 0 {
		return DefaultRPM
	}
	return c.RateLimit.DefaultRPM
}

// AcceptsTenant reports whether ValidateToken accepts a token of tenant:
// any tenant when neither sdk.tenant_id nor sdk.accepted_tenants is set,
// else sdk.tenant_id and the tenants listed in sdk.accepted_tenants.
func (s SDK) AcceptsTenant(tenant string) bool {
	if s.TenantID == "" && len(s.AcceptedTenants) == 0 {
		return true
	}
	if tenant == s.TenantID && tenant != "" {
		return true
	}
	for _, t := range s.AcceptedTenants {
		if t == tenant {
			return true
		}
	}
	return false
}

// IsFile reports whether the destination is a file path.
func (a Audit) IsFile() bool {
	switch a.Destination {
	case "", AuditStdout, AuditStderr, AuditOff:
		return false
	}
	return true
}

// Enabled reports whether audit records are written at all.
func (a Audit) Enabled() bool {
	return a.Destination != AuditOff
}
