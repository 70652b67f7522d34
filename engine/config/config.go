// Package config loads the svc configuration: the svc.toml file (or a YAML
// file of the same shape) overridden by SVC_* environment variables.
//
// Every field is documented; SetDefaults fills what the file left out and
// Validate rejects what cannot work, naming the key and where it came from.
package config

import "time"

// Config is the whole configuration of the engine and the sidecar.
type Config struct {
	// SDK is the [sdk] table of the spec: the fields shared by the sidecar,
	// the SDKs and the in-process engine.
	SDK SDK `toml:"sdk" yaml:"sdk"`
	// Policy says where the policies come from.
	Policy Policy `toml:"policy" yaml:"policy"`
	// JWT tunes token verification.
	JWT JWT `toml:"jwt" yaml:"jwt"`
	// Tenants maps a tenant id (case-sensitive) to its settings.
	Tenants map[string]Tenant `toml:"tenants" yaml:"tenants"`
	// RateLimit sets per-tenant request budgets.
	RateLimit RateLimit `toml:"rate_limit" yaml:"rate_limit"`
	// Sidecar holds the daemon's own listeners and lifecycle settings.
	Sidecar Sidecar `toml:"sidecar" yaml:"sidecar"`
	// Audit configures the decision audit log.
	Audit Audit `toml:"audit" yaml:"audit"`
	// Log configures structured logging.
	Log Log `toml:"log" yaml:"log"`

	// Source names where the configuration came from (a file path, or
	// "defaults"); it is not read from the file.
	Source string `toml:"-" yaml:"-"`
}

// Fail modes.
const (
	FailOpen   = "open"
	FailClosed = "closed"
)

// SDK is the [sdk] table.
type SDK struct {
	// SidecarAddr is the gRPC listen address of the sidecar (and the address
	// clients dial). Default "[::1]:50051". Env SVC_SIDECAR_ADDR.
	SidecarAddr string `toml:"sidecar_addr" yaml:"sidecar_addr"`
	// TenantID is the tenant of this deployment. Env SVC_TENANT_ID.
	TenantID string `toml:"tenant_id" yaml:"tenant_id"`
	// ServiceName becomes the OTel service.name. Default "svc-sidecar".
	// Env SVC_SERVICE_NAME.
	ServiceName string `toml:"service_name" yaml:"service_name"`
	// FailMode is "open" (default) or "closed". Env SVC_FAIL_MODE.
	FailMode string `toml:"fail_mode" yaml:"fail_mode"`
	// JWKSURL is the identity provider's JWKS endpoint: https, or http on a
	// loopback host. Empty with fail_mode=open means development mode.
	// Env SVC_JWKS_URL.
	JWKSURL string `toml:"jwks_url" yaml:"jwks_url"`
	// SAML is the optional SAML service-provider configuration (Phase 2).
	SAML *SAML `toml:"saml" yaml:"saml"`
}

// SAML is the [sdk.saml] table.
type SAML struct {
	EntityID         string           `toml:"entity_id" yaml:"entity_id"`
	ACSURL           string           `toml:"acs_url" yaml:"acs_url"`
	IDPMetadataURL   string           `toml:"idp_metadata_url" yaml:"idp_metadata_url"`
	ClockSkewSeconds int              `toml:"clock_skew_seconds" yaml:"clock_skew_seconds"`
	AttributeMapping AttributeMapping `toml:"attribute_mapping" yaml:"attribute_mapping"`
	// SPPrivateKeyFile / SPCertificateFile are paths; key material is never
	// inline in the file (env SVC_SAML_SP_PRIVATE_KEY_PEM may carry it).
	SPPrivateKeyFile  string `toml:"sp_private_key_file" yaml:"sp_private_key_file"`
	SPCertificateFile string `toml:"sp_certificate_file" yaml:"sp_certificate_file"`
}

// AttributeMapping names the SAML attributes that fill JWT claims.
type AttributeMapping struct {
	Email  string `toml:"email" yaml:"email"`
	Role   string `toml:"role" yaml:"role"`
	Tenant string `toml:"tenant" yaml:"tenant"`
}

// Policy is the [policy] table.
type Policy struct {
	// Dir is the directory of .rego files (and data.json/data.yaml).
	// Empty means the embedded default policy. Env SVC_POLICY_DIR.
	Dir string `toml:"dir" yaml:"dir"`
	// BundleVerifyKeyFile is a PEM public key; when set, only bundles signed
	// by it are accepted. Env SVC_BUNDLE_VERIFY_KEY_FILE.
	BundleVerifyKeyFile string `toml:"bundle_verify_key_file" yaml:"bundle_verify_key_file"`
}

// JWT is the [jwt] table.
type JWT struct {
	// Issuer, when set, must equal the token's iss. Env SVC_JWT_ISSUER.
	Issuer string `toml:"issuer" yaml:"issuer"`
	// Audiences, when set, must contain one of the token's aud values.
	// Env SVC_JWT_AUDIENCES (comma-separated).
	Audiences []string `toml:"audiences" yaml:"audiences"`
	// ClockSkew tolerated for exp/nbf/iat. Default 30s.
	ClockSkew Duration `toml:"clock_skew" yaml:"clock_skew"`
	// CacheSize bounds the verified-token cache (entries). Default 100000.
	CacheSize int `toml:"cache_size" yaml:"cache_size"`
	// JWKSFetchTimeout bounds one JWKS fetch. Default 5s.
	JWKSFetchTimeout Duration `toml:"jwks_fetch_timeout" yaml:"jwks_fetch_timeout"`
	// JWKSMinRefresh / JWKSMaxRefresh bound the background refresh interval
	// derived from Cache-Control. Defaults 1m and 1h.
	JWKSMinRefresh Duration `toml:"jwks_min_refresh" yaml:"jwks_min_refresh"`
	JWKSMaxRefresh Duration `toml:"jwks_max_refresh" yaml:"jwks_max_refresh"`
}

// Tenant is one [tenants.<id>] table.
type Tenant struct {
	// Plan is exposed to policies as input.tenant.plan.
	Plan string `toml:"plan" yaml:"plan"`
}

// RateLimit is the [rate_limit] table.
type RateLimit struct {
	// DefaultRPM is the per-tenant budget in requests per minute when the
	// tenant has no entry. Default 1000; 0 after defaults means unlimited
	// only when Disabled.
	DefaultRPM int `toml:"default_rpm" yaml:"default_rpm"`
	// PerTenant maps a tenant id (case-sensitive) to its budget.
	PerTenant map[string]int `toml:"per_tenant" yaml:"per_tenant"`
	// Disabled turns rate limiting off.
	Disabled bool `toml:"disabled" yaml:"disabled"`
	// RedisAddr, when set, shares budgets across replicas through Redis.
	RedisAddr string `toml:"redis_addr" yaml:"redis_addr"`
}

// Sidecar is the [sidecar] table.
type Sidecar struct {
	// HTTPAddr is the local HTTP API listen address. Default
	// "127.0.0.1:7700". Env SVC_HTTP_ADDR.
	HTTPAddr string `toml:"http_addr" yaml:"http_addr"`
	// AdminTokenFile holds a bearer token that lets non-loopback callers
	// use mutating endpoints. Env SVC_ADMIN_TOKEN_FILE.
	AdminTokenFile string `toml:"admin_token_file" yaml:"admin_token_file"`
	// DrainTimeout bounds graceful shutdown. Default 30s.
	DrainTimeout Duration `toml:"drain_timeout" yaml:"drain_timeout"`
	// Routes map request paths to resources and actions for the Envoy and
	// HTTP check paths, tried in order.
	Routes []Route `toml:"routes" yaml:"routes"`
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

// Audit is the [audit] table.
type Audit struct {
	// Destination is "stdout", "stderr", a file path, or "" for off.
	// Default "stdout". Env SVC_AUDIT_DESTINATION.
	Destination string `toml:"destination" yaml:"destination"`
	// QueueSize bounds records waiting to be written. Default 4096.
	QueueSize int `toml:"queue_size" yaml:"queue_size"`
}

// Log is the [log] table.
type Log struct {
	// Level is trace, debug, info (default), warn or error. Env SVC_LOG_LEVEL.
	Level string `toml:"level" yaml:"level"`
}

// Duration is a time.Duration written as a Go duration string ("30s").
type Duration struct{ time.Duration }
