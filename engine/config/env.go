package config

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EnvVar describes one SVC_* environment variable that overrides a key of
// the file. The table returned by EnvVars is the single place where the
// variables are defined, so documentation can be generated from it.
type EnvVar struct {
	// Name is the variable, such as "SVC_JWKS_URL".
	Name string
	// Key is the config key it overrides, such as "sdk.jwks_url".
	Key string
	// Help says what the value is, in one sentence.
	Help string
	// EnvOnly marks a setting that exists only as this variable: key
	// material that is never inline in a file. Key names it in messages,
	// but a file that sets Key is refused as an unknown key.
	EnvOnly bool

	apply func(c *Config, v string) string
}

// envTable is every SVC_* variable, in the order the reference lists
// them. It is never modified; EnvVars hands out copies.
var envTable = slices.Concat(coreEnv, signInEnv, decisionLogEnv())

var coreEnv = []EnvVar{
	{Name: "SVC_SIDECAR_ADDR", Key: "sdk.sidecar_addr",
		Help:  `Listen address (host:port) of the gRPC endpoint. Default "[::1]:50051".`,
		apply: func(c *Config, v string) string { c.SDK.SidecarAddr = v; return "" }},
	{Name: "SVC_TENANT_ID", Key: "sdk.tenant_id",
		Help:  "Tenant id of the deployment.",
		apply: func(c *Config, v string) string { c.SDK.TenantID = v; return "" }},
	{Name: "SVC_ACCEPTED_TENANTS", Key: "sdk.accepted_tenants",
		Help:  "Comma-separated further tenants whose tokens ValidateToken accepts.",
		apply: func(c *Config, v string) string { c.SDK.AcceptedTenants = commaList(v); return "" }},
	{Name: "SVC_SERVICE_NAME", Key: "sdk.service_name",
		Help:  `OTel service.name. Default "svc-sidecar".`,
		apply: func(c *Config, v string) string { c.SDK.ServiceName = v; return "" }},
	{Name: "SVC_FAIL_MODE", Key: "sdk.fail_mode",
		Help: `"open" (default) or "closed".`,
		apply: func(c *Config, v string) string {
			c.SDK.FailMode = v
			return checkFailMode(v)
		}},
	{Name: "SVC_JWKS_URL", Key: "sdk.jwks_url",
		Help:  "HTTPS URL of the identity provider's JWKS endpoint (http only on a loopback host).",
		apply: func(c *Config, v string) string { c.SDK.JWKSURL = v; return "" }},
	{Name: "SVC_DEV_ISSUER_DIR", Key: "sdk.dev_issuer_dir",
		Help:  "Directory of the development issuer's key pair (core dev token), read in development mode only. Default ~/.config/svc/dev-issuer.",
		apply: func(c *Config, v string) string { c.SDK.DevIssuerDir = v; return "" }},
	{Name: "SVC_API_KEYS_FILE", Key: "api_keys.file",
		Help:  "API-key file (hashes of the keys, written by core api-key create); setting it makes API keys an identity source.",
		apply: func(c *Config, v string) string { c.APIKeys.File = v; return "" }},
	{Name: "SVC_INTROSPECTION_URL", Key: "introspection.url",
		Help:  "RFC 7662 introspection endpoint; setting it makes opaque tokens (bearers that are not a JWS) an identity source.",
		apply: func(c *Config, v string) string { c.Introspection.URL = v; return "" }},
	{Name: "SVC_INTROSPECTION_CLIENT_ID", Key: "introspection.client_id",
		Help:  "Client id svc authenticates with at the introspection endpoint (client_secret_basic).",
		apply: func(c *Config, v string) string { c.Introspection.ClientID = v; return "" }},
	{Name: "SVC_INTROSPECTION_CLIENT_SECRET_FILE", Key: "introspection.client_secret_file",
		Help:  "File holding the client secret for the introspection endpoint.",
		apply: func(c *Config, v string) string { c.Introspection.ClientSecretFile = v; return "" }},
	{Name: "SVC_INTROSPECTION_TENANT_CLAIM", Key: "introspection.tenant_claim",
		Help:  `Member of an active introspection answer that holds the tenant. Default "tenant_id".`,
		apply: func(c *Config, v string) string { c.Introspection.TenantClaim = v; return "" }},
	{Name: "SVC_INTROSPECTION_CACHE_TTL", Key: "introspection.cache_ttl",
		Help: `How long an active introspection answer is reused, never past the token's exp (Go duration). Default "5m".`,
		apply: func(c *Config, v string) string {
			var d Duration
			if err := d.UnmarshalText([]byte(v)); err != nil {
				return err.Error()
			}
			c.Introspection.CacheTTL = d
			return ""
		}},
	{Name: "SVC_INTROSPECTION_NEGATIVE_CACHE_TTL", Key: "introspection.negative_cache_ttl",
		Help: `How long an inactive introspection answer is reused (Go duration). Default "10s".`,
		apply: func(c *Config, v string) string {
			var d Duration
			if err := d.UnmarshalText([]byte(v)); err != nil {
				return err.Error()
			}
			c.Introspection.NegativeCacheTTL = d
			return ""
		}},
	{Name: "SVC_IDENTITY_TOKEN_SIGNING_KEY_FILE", Key: "identity_token.signing_key_file",
		Help:  "PEM file of EC P-256 keys (ES256); the first signs the x-svc-identity token handed to the upstream of every allowed request. Setting it turns identity tokens on.",
		apply: func(c *Config, v string) string { c.IdentityToken.SigningKeyFile = v; return "" }},
	{Name: "SVC_IDENTITY_TOKEN_TTL", Key: "identity_token.ttl",
		Help: `Lifetime of an identity token (Go duration, at most 1h). Default "5m".`,
		apply: func(c *Config, v string) string {
			var d Duration
			if err := d.UnmarshalText([]byte(v)); err != nil {
				return err.Error()
			}
			c.IdentityToken.TTL = d
			return ""
		}},
	{Name: "SVC_POLICY_DIR", Key: "policy.dir",
		Help:  "Directory of .rego policy files; unset means the embedded default policy.",
		apply: func(c *Config, v string) string { c.Policy.Dir = v; return "" }},
	{Name: "SVC_BUNDLE_VERIFY_KEY_FILE", Key: "policy.bundle_verify_key_file",
		Help:  "PEM public key file; when set, only bundles signed by it are accepted. Unset: bundles are refused, except in development mode (no identity source), which accepts them unchecked.",
		apply: func(c *Config, v string) string { c.Policy.BundleVerifyKeyFile = v; return "" }},
	{Name: "SVC_BUNDLE_CACHE_DIR", Key: "policy.bundle_cache_dir",
		Help:  "Directory where the active policy bundle is persisted so that a restart keeps serving it.",
		apply: func(c *Config, v string) string { c.Policy.BundleCacheDir = v; return "" }},
	{Name: "SVC_POLICY_MODE", Key: "policy.mode",
		Help: `"enforce" (default) or "dry-run": evaluate and record simulated outcomes, never deny on policy.`,
		apply: func(c *Config, v string) string {
			c.Policy.Mode = v
			return checkPolicyMode(v)
		}},
	{Name: "SVC_BUNDLE_URL", Key: "policy.bundle_url",
		Help:  "URL of a control plane's policy bundle, polled with ETag and verified with the bundle key.",
		apply: func(c *Config, v string) string { c.Policy.BundleURL = v; return "" }},
	{Name: "SVC_BUNDLE_TOKEN_FILE", Key: "policy.bundle_token_file",
		Help:  "File holding the bearer token sent to policy.bundle_url.",
		apply: func(c *Config, v string) string { c.Policy.BundleTokenFile = v; return "" }},
	{Name: "SVC_BUNDLE_MAX_AGE", Key: "policy.bundle_max_age",
		Help: `Oldest a bundle may be (by its manifest's created_at) before the status turns degraded, or it is refused (policy.bundle_max_age_action); "0" (default) is off.`,
		apply: func(c *Config, v string) string {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return "must be a non-negative duration such as \"24h\", got " + strconv.Quote(v)
			}
			c.Policy.BundleMaxAge = Duration{d}
			return ""
		}},
	{Name: "SVC_BUNDLE_MAX_AGE_ACTION", Key: "policy.bundle_max_age_action",
		Help: `"degrade" (default): a bundle older than policy.bundle_max_age serves, status degraded; "refuse": it is not activated.`,
		apply: func(c *Config, v string) string {
			c.Policy.BundleMaxAgeAction = v
			return checkBundleMaxAgeAction(v)
		}},
	{Name: "SVC_POLICY_ALLOW_NETWORK_BUILTINS", Key: "policy.allow_network_builtins",
		Help: "true lets policies call http.send, net.lookup_ip_addr and opa.runtime.",
		apply: func(c *Config, v string) string {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "must be true or false, got " + strconv.Quote(v)
			}
			c.Policy.AllowNetworkBuiltins = b
			return ""
		}},
	{Name: "SVC_POLICY_DRY_RUN_EVAL_TIMEOUT", Key: "policy.dry_run_eval_timeout",
		Help: `Bound of each evaluation of a dry-run candidate, such as "50ms" (default; at most 10s).`,
		apply: func(c *Config, v string) string {
			d, err := time.ParseDuration(v)
			if err != nil {
				return "must be a duration such as \"50ms\", got " + strconv.Quote(v)
			}
			c.Policy.DryRunEvalTimeout = Duration{d}
			return ""
		}},
	{Name: "SVC_POLICY_BUNDLE_MAX_BYTES", Key: "policy.bundle_max_bytes",
		Help: "Largest policy bundle archive, and largest file in one, in bytes; its files may unpack to 8 times as much. Default 33554432 (32 MiB).",
		apply: func(c *Config, v string) string {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return "must be an integer number of bytes, got " + strconv.Quote(v)
			}
			c.Policy.BundleMaxBytes = n
			return checkBundleMaxBytes(n)
		}},
	{Name: "SVC_POLICY_DECISION_CACHE_SIZE", Key: "policy.decision_cache_size",
		Help: "Decisions each policy set's decision cache holds (about 250 bytes each). Default 32768.",
		apply: func(c *Config, v string) string {
			n, err := strconv.Atoi(v)
			if err != nil {
				return "must be an integer number of entries, got " + strconv.Quote(v)
			}
			c.Policy.DecisionCacheSize = n
			return checkDecisionCacheSize(n)
		}},
	{Name: "SVC_LOG_LEVEL", Key: "log.level",
		Help: "One of trace, debug, info (default), warn, error.",
		apply: func(c *Config, v string) string {
			c.Log.Level = v
			return checkLogLevel(v)
		}},
	{Name: "SVC_JWT_ISSUER", Key: "jwt.issuer",
		Help:  "Required token issuer (iss), when set.",
		apply: func(c *Config, v string) string { c.JWT.Issuer = v; return "" }},
	{Name: "SVC_JWT_ISSUER_URL", Key: "jwt.issuer_url",
		Help:  "OpenID Connect issuer whose discovery document names the JWKS, instead of SVC_JWKS_URL; tokens must carry it as iss.",
		apply: func(c *Config, v string) string { c.JWT.IssuerURL = v; return "" }},
	{Name: "SVC_JWT_AUDIENCES", Key: "jwt.audiences",
		Help:  "Comma-separated audiences; a token must carry one of them, when set.",
		apply: func(c *Config, v string) string { c.JWT.Audiences = commaList(v); return "" }},
	{Name: "SVC_JWT_ALLOWED_TYP", Key: "jwt.allowed_typ",
		Help:  `Comma-separated JOSE typ values a token must carry one of, when set (e.g. "at+jwt").`,
		apply: func(c *Config, v string) string { c.JWT.AllowedTyp = commaList(v); return "" }},
	{Name: "SVC_JWT_CACHE_MAX_AGE", Key: "jwt.cache_max_age",
		Help: `Longest time a verified token is served from the cache, whatever its exp. Default "10m".`,
		apply: func(c *Config, v string) string {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return "must be a non-negative duration such as \"10m\", got " + strconv.Quote(v)
			}
			c.JWT.CacheMaxAge = Duration{d}
			return ""
		}},
	{Name: "SVC_HTTP_ADDR", Key: "sidecar.http_addr",
		Help:  `Listen address (host:port) of the local HTTP API. Default "127.0.0.1:7700".`,
		apply: func(c *Config, v string) string { c.Sidecar.HTTPAddr = v; return "" }},
	{Name: "SVC_STATE_DIR", Key: "sidecar.state_dir",
		Help:  "Directory of the record of the last accepted signed bundle; default $STATE_DIRECTORY, $XDG_STATE_HOME/svc or an existing /var/lib/svc.",
		apply: func(c *Config, v string) string { c.Sidecar.StateDir = v; return "" }},
	{Name: "SVC_CHECK_PROXY", Key: "sidecar.check_proxy",
		Help: `Proxy in front of /check: "auto" (default), "nginx", "forwarded" (Caddy, Traefik) or "envoy" (http_service only).`,
		apply: func(c *Config, v string) string {
			c.Sidecar.CheckProxy = v
			return checkCheckProxy(v)
		}},
	{Name: "SVC_TRUST_FORWARDED_FOR", Key: "sidecar.trust_forwarded_for",
		Help: "true lets policies see X-Forwarded-For, Forwarded and X-Real-IP request headers.",
		apply: func(c *Config, v string) string {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "must be true or false, got " + strconv.Quote(v)
			}
			c.Sidecar.TrustForwardedFor = b
			return ""
		}},
	{Name: "SVC_TRUSTED_PROXIES", Key: "sidecar.trusted_proxies",
		Help: "Comma-separated CIDRs of the proxies allowed to name the client of a SAML ACS post (X-Real-IP, or the last X-Forwarded-For hop).",
		apply: func(c *Config, v string) string {
			c.Sidecar.TrustedProxies = commaList(v)
			if _, err := ParseTrustedProxies(c.Sidecar.TrustedProxies); err != nil {
				return err.Error()
			}
			return ""
		}},
	{Name: "SVC_ENVOY_ROUTES_CASE_SENSITIVE", Key: "envoy.routes_case_sensitive",
		Help: "true matches the literal segments of sidecar.routes templates case-sensitively (default false: case folded).",
		apply: func(c *Config, v string) string {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "must be true or false, got " + strconv.Quote(v)
			}
			c.Envoy.RoutesCaseSensitive = b
			return ""
		}},
	{Name: "SVC_ENVOY_FORMAT_SUFFIXES", Key: "envoy.format_suffixes",
		Help: "Comma-separated format suffixes cut off a path's last segment (default json,xml,csv,html,txt,yaml).",
		apply: func(c *Config, v string) string {
			c.Envoy.FormatSuffixes = commaList(v)
			if c.Envoy.FormatSuffixes == nil {
				c.Envoy.FormatSuffixes = []string{}
			}
			return checkFormatSuffixes(c.Envoy.FormatSuffixes)
		}},
	{Name: "SVC_ADMIN_TOKEN_FILE", Key: "sidecar.admin_token_file",
		Help:  "File holding the bearer token that lets non-loopback callers use mutating endpoints.",
		apply: func(c *Config, v string) string { c.Sidecar.AdminTokenFile = v; return "" }},
	{Name: "SVC_ADMIN_REQUIRE_TOKEN", Key: "sidecar.admin_require_token",
		Help: "true requires the admin token from loopback and Unix socket callers too.",
		apply: func(c *Config, v string) string {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "must be true or false, got " + strconv.Quote(v)
			}
			c.Sidecar.AdminRequireToken = b
			return ""
		}},
	{Name: "SVC_TLS_CERT_FILE", Key: "sidecar.tls_cert_file",
		Help:  "PEM certificate chain; with SVC_TLS_KEY_FILE the gRPC and HTTP listeners serve TLS.",
		apply: func(c *Config, v string) string { c.Sidecar.TLSCertFile = v; return "" }},
	{Name: "SVC_TLS_KEY_FILE", Key: "sidecar.tls_key_file",
		Help:  "PEM private key of the TLS certificate.",
		apply: func(c *Config, v string) string { c.Sidecar.TLSKeyFile = v; return "" }},
	{Name: "SVC_TLS_CLIENT_CA_FILE", Key: "sidecar.tls_client_ca_file",
		Help:  "PEM CA certificates; when set, clients must present a certificate they issued (mutual TLS).",
		apply: func(c *Config, v string) string { c.Sidecar.TLSClientCAFile = v; return "" }},
	{Name: "SVC_SOCKET_MODE", Key: "sidecar.socket_mode",
		Help:  `Octal file mode of Unix domain sockets the sidecar listens on. Default "0660".`,
		apply: func(c *Config, v string) string { c.Sidecar.SocketMode = v; return "" }},
	{Name: "SVC_PUBLIC_READ", Key: "sidecar.public_read",
		Help: "true lets callers off loopback use the read endpoints without the admin token.",
		apply: func(c *Config, v string) string {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "must be true or false, got " + strconv.Quote(v)
			}
			c.Sidecar.PublicRead = b
			return ""
		}},
	{Name: "SVC_AUDIT_DESTINATION", Key: "audit.destination",
		Help:  `Audit log destination: "stdout" (default), "stderr", "off" or a file path.`,
		apply: func(c *Config, v string) string { c.Audit.Destination = v; return "" }},
	{Name: "SVC_AUDIT_MAX_SIZE_MB", Key: "audit.max_size_mb",
		Help:  "Rotate a file audit log when it would grow past this many megabytes; 0 never rotates.",
		apply: func(c *Config, v string) string { return nonNegative(&c.Audit.MaxSizeMB, v) }},
	{Name: "SVC_AUDIT_MAX_BACKUPS", Key: "audit.max_backups",
		Help:  "Rotated audit files to keep; 0 keeps them all.",
		apply: func(c *Config, v string) string { return nonNegative(&c.Audit.MaxBackups, v) }},
	{Name: "SVC_RATE_LIMIT_DEFAULT_RPM", Key: "rate_limit.default_rpm",
		Help: "Per-tenant budget in requests per minute for tenants without their own entry. Default 1000.",
		apply: func(c *Config, v string) string {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return "must be a non-negative integer, got " + strconv.Quote(v)
			}
			c.RateLimit.DefaultRPM = n
			return ""
		}},
	{Name: "SVC_REDIS_ADDR", Key: "rate_limit.redis_addr",
		Help:  "Redis address (host:port) that shares rate-limit budgets across replicas.",
		apply: func(c *Config, v string) string { c.RateLimit.RedisAddr = v; return "" }},
	{Name: "SVC_REDIS_TIMEOUT", Key: "rate_limit.redis_timeout",
		Help: `Bound of each rate-limit call to Redis (Go duration); past it the request passes uncounted. Default "50ms".`,
		apply: func(c *Config, v string) string {
			var d Duration
			if err := d.UnmarshalText([]byte(v)); err != nil {
				return err.Error()
			}
			c.RateLimit.RedisTimeout = d
			return ""
		}},
	{Name: "SVC_RATE_LIMIT_REDIS_FALLBACK", Key: "rate_limit.redis_fallback",
		Help:  `How requests are limited while Redis is unreachable: "local" (each tenant's budget divided by rate_limit.replicas, in memory), "allow" (uncounted) or "deny" (rate-limited). Default "local".`,
		apply: func(c *Config, v string) string { c.RateLimit.RedisFallback = v; return "" }},
	{Name: "SVC_RATE_LIMIT_REPLICAS", Key: "rate_limit.replicas",
		Help: "Number of replicas sharing the Redis budgets; the local fallback allows each 1/replicas of a budget. Default 1.",
		apply: func(c *Config, v string) string {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return "must be a positive integer, got " + strconv.Quote(v)
			}
			c.RateLimit.Replicas = n
			return ""
		}},
	{Name: "SVC_REDIS_TLS", Key: "rate_limit.redis_tls",
		Help: "true connects to Redis over TLS, its certificate verified against the system's authorities or rate_limit.redis_tls_ca_file.",
		apply: func(c *Config, v string) string {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "must be true or false, got " + strconv.Quote(v)
			}
			c.RateLimit.RedisTLS = b
			return ""
		}},
	{Name: "SVC_REDIS_TLS_CA_FILE", Key: "rate_limit.redis_tls_ca_file",
		Help:  "PEM file of the authorities Redis's TLS certificate is verified against, instead of the system's.",
		apply: func(c *Config, v string) string { c.RateLimit.RedisTLSCAFile = v; return "" }},
	{Name: "SVC_REDIS_USERNAME", Key: "rate_limit.redis_username",
		Help:  "Redis ACL user the sidecar authenticates as (Redis 6 and later); empty for the default user.",
		apply: func(c *Config, v string) string { c.RateLimit.RedisUsername = v; return "" }},
	{Name: "SVC_REDIS_PASSWORD_FILE", Key: "rate_limit.redis_password_file",
		Help:  "File holding the password of rate_limit.redis_username, or of the default user (requirepass).",
		apply: func(c *Config, v string) string { c.RateLimit.RedisPasswordFile = v; return "" }},
	{Name: "SVC_SAML_ADDR", Key: "sidecar.saml_addr",
		Help:  `Listen address (host:port) of the SAML gateway. Default "127.0.0.1:7701".`,
		apply: func(c *Config, v string) string { c.Sidecar.SAMLAddr = v; return "" }},
	// Every SVC_SAML_* variable below creates [sdk.saml] when the file has
	// none, so that SAML can be configured from the environment alone.
	{Name: "SVC_SAML_ENTITY_ID", Key: "sdk.saml.entity_id",
		Help:  "SAML SP entity id (the audience at the identity provider; iss and aud of the issued tokens).",
		apply: func(c *Config, v string) string { samlOf(c).EntityID = v; return "" }},
	{Name: "SVC_SAML_ACS_URL", Key: "sdk.saml.acs_url",
		Help:  "SAML assertion consumer service URL (the reply URL at the identity provider).",
		apply: func(c *Config, v string) string { samlOf(c).ACSURL = v; return "" }},
	{Name: "SVC_SAML_IDP_METADATA_URL", Key: "sdk.saml.idp_metadata_url",
		Help:  "Metadata URL of the SAML identity provider (https, or http on a loopback host).",
		apply: func(c *Config, v string) string { samlOf(c).IDPMetadataURL = v; return "" }},
	{Name: "SVC_SAML_IDP_METADATA_FILE", Key: "sdk.saml.idp_metadata_file",
		Help:  "Downloaded metadata file of the SAML identity provider.",
		apply: func(c *Config, v string) string { samlOf(c).IDPMetadataFile = v; return "" }},
	{Name: "SVC_SAML_IDP_METADATA_SIGNING_CERTIFICATE_FILE", Key: "sdk.saml.idp_metadata_signing_certificate_file",
		Help:  "PEM certificate(s) that must have signed the SAML identity provider's metadata.",
		apply: func(c *Config, v string) string { samlOf(c).IDPMetadataSigningCertificateFile = v; return "" }},
	{Name: "SVC_SAML_CLOCK_SKEW_SECONDS", Key: "sdk.saml.clock_skew_seconds",
		Help: "Clock difference tolerated while validating an assertion, in seconds. Default 30.",
		apply: func(c *Config, v string) string {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return "must be a non-negative integer, got " + strconv.Quote(v)
			}
			samlOf(c).ClockSkewSeconds = n
			return ""
		}},
	{Name: "SVC_SAML_ATTRIBUTE_EMAIL", Key: "sdk.saml.attribute_mapping.email",
		Help:  "SAML attribute that fills the email claim. Default the standard e-mail-address claim URI.",
		apply: func(c *Config, v string) string { samlOf(c).AttributeMapping.Email = v; return "" }},
	{Name: "SVC_SAML_ATTRIBUTE_ROLE", Key: "sdk.saml.attribute_mapping.role",
		Help:  `SAML attribute that fills the roles claim. Default "role".`,
		apply: func(c *Config, v string) string { samlOf(c).AttributeMapping.Role = v; return "" }},
	{Name: "SVC_SAML_ATTRIBUTE_TENANT", Key: "sdk.saml.attribute_mapping.tenant",
		Help:  `SAML attribute that fills the tenant_id claim (required in every assertion). Default "tenant_id".`,
		apply: func(c *Config, v string) string { samlOf(c).AttributeMapping.Tenant = v; return "" }},
	{Name: "SVC_SAML_SP_PRIVATE_KEY_FILE", Key: "sdk.saml.sp_private_key_file",
		Help:  "PEM file of the SAML SP private key.",
		apply: func(c *Config, v string) string { samlOf(c).SPPrivateKeyFile = v; return "" }},
	{Name: "SVC_SAML_SP_CERTIFICATE_FILE", Key: "sdk.saml.sp_certificate_file",
		Help:  "PEM file of the SAML SP certificate.",
		apply: func(c *Config, v string) string { samlOf(c).SPCertificateFile = v; return "" }},
	{Name: "SVC_SAML_SP_PRIVATE_KEY_PEM", Key: "sdk.saml.sp_private_key_pem", EnvOnly: true,
		Help:  "PEM text of the SAML SP private key, instead of sdk.saml.sp_private_key_file; environment only, no file key.",
		apply: func(c *Config, v string) string { samlOf(c).SPPrivateKeyPEM = v; return "" }},
	{Name: "SVC_SAML_SP_CERTIFICATE_PEM", Key: "sdk.saml.sp_certificate_pem", EnvOnly: true,
		Help:  "PEM text of the SAML SP certificate, instead of sdk.saml.sp_certificate_file; environment only, no file key.",
		apply: func(c *Config, v string) string { samlOf(c).SPCertificatePEM = v; return "" }},
	{Name: "SVC_SAML_ALLOW_IDP_INITIATED", Key: "sdk.saml.allow_idp_initiated",
		Help: "true accepts unsolicited (IdP-initiated) SAML responses. Default false.",
		apply: func(c *Config, v string) string {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "must be true or false, got " + strconv.Quote(v)
			}
			samlOf(c).AllowIDPInitiated = b
			return ""
		}},
	{Name: "SVC_SAML_TOKEN_TTL", Key: "sdk.saml.token_ttl",
		Help: "Lifetime of the tokens the SAML gateway issues (Go duration). Default 15m.",
		apply: func(c *Config, v string) string {
			var d Duration
			if err := d.UnmarshalText([]byte(v)); err != nil {
				return err.Error()
			}
			samlOf(c).TokenTTL = d
			return ""
		}},
	{Name: "SVC_SAML_ACS_MAX_CONCURRENT", Key: "sdk.saml.acs_max_concurrent",
		Help: "Responses the SAML ACS validates at once; more are answered 503 saml-busy. Default half of GOMAXPROCS, at least 1.",
		apply: func(c *Config, v string) string {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return "must be a positive integer, got " + strconv.Quote(v)
			}
			samlOf(c).ACSMaxConcurrent = n
			return ""
		}},
	{Name: "SVC_SAML_ACS_TIMEOUT", Key: "sdk.saml.acs_timeout",
		Help: "Deadline of the validation of one SAML response (Go duration). Default 5s.",
		apply: func(c *Config, v string) string {
			var d Duration
			if err := d.UnmarshalText([]byte(v)); err != nil {
				return err.Error()
			}
			samlOf(c).ACSTimeout = d
			return ""
		}},
	{Name: "SVC_SAML_TOKEN_SIGNING_KEY_FILE", Key: "sdk.saml.token_signing_key_file",
		Help:  "EC P-256 private key (PEM) that signs the SAML gateway's tokens, shared by replicas.",
		apply: func(c *Config, v string) string { samlOf(c).TokenSigningKeyFile = v; return "" }},
	{Name: "SVC_SAML_COOKIE_NAME", Key: "sdk.saml.cookie_name",
		Help:  `Session cookie of the SAML gateway. Default "svc_session".`,
		apply: func(c *Config, v string) string { samlOf(c).CookieName = v; return "" }},
	{Name: "SVC_SAML_PATH_PREFIX", Key: "sdk.saml.path_prefix",
		Help:  `Path prefix of the SAML endpoints. Default "/auth/saml".`,
		apply: func(c *Config, v string) string { samlOf(c).PathPrefix = v; return "" }},
	{Name: "SVC_SAML_BROWSER_REDIRECT", Key: "sdk.saml.browser_redirect",
		Help: "false answers browsers without a session 401 instead of sending them to the SAML login. Default true.",
		apply: func(c *Config, v string) string {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "must be true or false, got " + strconv.Quote(v)
			}
			samlOf(c).BrowserRedirect = &b
			return ""
		}},
	{Name: "SVC_SAML_DEFAULT_RETURN_TO", Key: "sdk.saml.default_return_to",
		Help:  `Relative path where SAML login, ACS and logout land without return_to. Default "/".`,
		apply: func(c *Config, v string) string { samlOf(c).DefaultReturnTo = v; return "" }},
}

// samlOf returns c's [sdk.saml] table, creating it when absent.
func samlOf(c *Config) *SAML {
	if c.SDK.SAML == nil {
		c.SDK.SAML = &SAML{}
	}
	return c.SDK.SAML
}

// commaList splits a comma-separated value, dropping empty items.
func commaList(v string) []string {
	var out []string
	for a := range strings.SplitSeq(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// EnvVars returns the SVC_* environment variables that override the file,
// in a stable order.
func EnvVars() []EnvVar {
	return slices.Clone(envTable)
}

// envKey returns the config key that the environment variable name
// overrides, or "" when name is not one of ours.
func envKey(name string) string {
	for _, v := range envTable {
		if v.Name == name {
			return v.Key
		}
	}
	return ""
}

// FromEnv applies the SVC_* environment variables to cfg, recording each
// one it used in cfg.Overrides. A variable that is unset or empty leaves
// the file's value alone. lookupEnv is usually os.LookupEnv (used when nil).
// A value that cannot be used is an error naming the variable; every such
// variable is reported, and the others are still applied.
func FromEnv(cfg *Config, lookupEnv func(string) (string, bool)) error {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	var errs []*Error
	for _, ev := range envTable {
		v, ok := lookupEnv(ev.Name)
		if !ok || v == "" {
			continue
		}
		if cfg.Overrides == nil {
			cfg.Overrides = make(map[string]string)
		}
		cfg.Overrides[ev.Key] = ev.Name
		if msg := ev.apply(cfg, v); msg != "" {
			errs = append(errs, &Error{Source: ev.Name, Key: ev.Key, Msg: msg})
		}
	}
	return join(errs)
}

// nonNegative parses v into *p, or says why it cannot.
func nonNegative(p *int, v string) string {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return "must be a non-negative integer, got " + strconv.Quote(v)
	}
	*p = n
	return ""
}
