package config

import (
	"errors"
	"testing"
	"time"
)

// validConfig is a production-like configuration that passes Validate.
func validConfig() Config {
	c := Config{
		Source: "svc.toml",
		SDK: SDK{FailMode: FailClosed, JWKSURL: "https://idp.example.com/jwks", SAML: &SAML{
			EntityID:       "https://app.example.com/auth/saml/metadata",
			ACSURL:         "https://app.example.com/auth/saml/acs",
			IDPMetadataURL: "https://idp.example.com/saml/metadata",
		}},
		Tenants:   map[string]Tenant{"acme": {Plan: "pro"}},
		RateLimit: RateLimit{PerTenant: map[string]int{"acme": 10}, RedisAddr: "127.0.0.1:6379"},
		Sidecar:   Sidecar{Routes: []Route{{Path: "/api/{resource}/{id}", Methods: []string{"GET"}}}},
	}
	c.SetDefaults()
	return c
}

func TestValidateAcceptsValid(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	c := validConfig()
	c.SDK.SidecarAddr, c.Sidecar.HTTPAddr = ":0", "[::]:65535"
	c.SDK.SAML.ACSURL = "http://localhost:7701/auth/saml/acs"
	c.JWT.JWKSMinRefresh = c.JWT.JWKSMaxRefresh
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate of edge values: %v", err)
	}
}

// Each decision log sink with its URL shapes.
func TestValidateDecisionLogSinks(t *testing.T) {
	for _, tc := range []struct{ sink, url, tokenFile string }{
		{DecisionLogNATS, "nats://nats-1:4222,nats-2:4222", ""},
		{DecisionLogKafka, "kafka://broker1:9092", ""},
		{DecisionLogKafka, "kafka://broker1:9092,broker2:9092", ""},
		{DecisionLogHTTP, "https://logs.example.com/v1", "/run/secrets/logs-token"},
		{DecisionLogHTTP, "http://logs.internal:8181", ""},
		{DecisionLogHTTP, "http://127.0.0.1:8181", "/run/secrets/logs-token"},
	} {
		c := validConfig()
		c.DecisionLog = sinkLog(tc.sink, tc.url)
		c.DecisionLog.HTTPTokenFile = tc.tokenFile
		if err := c.Validate(); err != nil {
			t.Errorf("Validate of sink %s at %s: %v", tc.sink, tc.url, err)
		}
	}
}

// TestValidateNamesKeyAndSource checks each rule alone: exactly one error,
// naming the key and where the value came from.
func TestValidateNamesKeyAndSource(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		env    string // the SVC_* variable the key came from, if any
		key    string
		want   string
	}{
		{"fail_mode enum", func(c *Config) { c.SDK.FailMode = "x" }, "",
			"sdk.fail_mode", `svc.toml: sdk.fail_mode: must be "open" or "closed", got "x"`},
		{"fail_mode enum from env", func(c *Config) { c.SDK.FailMode = "maybe" }, "SVC_FAIL_MODE",
			"sdk.fail_mode", `SVC_FAIL_MODE: must be "open" or "closed", got "maybe"`},
		{"closed without jwks_url", func(c *Config) { c.SDK.JWKSURL = ""; c.SDK.SAML = nil }, "",
			"sdk.fail_mode", "svc.toml: sdk.fail_mode: fail_mode=closed requires an identity source (sdk.jwks_url or sdk.saml or jwt.issuer_url or jwt.issuers or api_keys.file or client_certs.trust_domains or introspection.url or sdk.oidc): without one every bearer is accepted as anonymous (development mode)"},
		{"identity_token.ttl too long", func(c *Config) { c.IdentityToken.TTL = Duration{2 * time.Hour} }, "SVC_IDENTITY_TOKEN_TTL",
			"identity_token.ttl", `SVC_IDENTITY_TOKEN_TTL: must be positive and at most 1h0m0s, got "2h0m0s"`},
		{"identity_token.ttl negative", func(c *Config) { c.IdentityToken.TTL = Duration{-time.Second} }, "",
			"identity_token.ttl", `svc.toml: identity_token.ttl: must be positive and at most 1h0m0s, got "-1s"`},
		{"introspection url public http", func(c *Config) {
			c.Introspection = Introspection{URL: "http://idp.example.com/introspect", ClientID: "svc", ClientSecretFile: "/run/s"}
			c.SetDefaults()
		}, "SVC_INTROSPECTION_URL",
			"introspection.url", `SVC_INTROSPECTION_URL: must use https (http only on a loopback host), got "http://idp.example.com/introspect"`},
		{"introspection without client id", func(c *Config) {
			c.Introspection = Introspection{URL: "https://idp.example.com/introspect", ClientSecretFile: "/run/s"}
			c.SetDefaults()
		}, "",
			"introspection.client_id", "svc.toml: introspection.client_id: must be set with introspection.url"},
		{"introspection secret without url", func(c *Config) { c.Introspection.ClientSecretFile = "/run/s" }, "",
			"introspection.client_secret_file", "svc.toml: introspection.client_secret_file: is set but introspection.url is not"},
		{"introspection negative cache ttl", func(c *Config) {
			c.Introspection = Introspection{URL: "https://idp.example.com/introspect", ClientID: "svc", ClientSecretFile: "/run/s",
				NegativeCacheTTL: Duration{-time.Second}}
			c.SetDefaults()
		}, "",
			"introspection.negative_cache_ttl", `svc.toml: introspection.negative_cache_ttl: must be positive, got "-1s"`},
		{"jwks_url unparseable", func(c *Config) { c.SDK.JWKSURL = "://idp" }, "",
			"sdk.jwks_url", "svc.toml: sdk.jwks_url: must be a URL: missing protocol scheme"},
		{"jwks_url public http", func(c *Config) { c.SDK.JWKSURL = "http://idp.example.com/jwks" }, "SVC_JWKS_URL",
			"sdk.jwks_url", `SVC_JWKS_URL: must use https (http only on a loopback host), got "http://idp.example.com/jwks"`},
		{"jwks_url with password", func(c *Config) { c.SDK.JWKSURL = "https://u:hunter2@idp.example.com/jwks" }, "",
			"sdk.jwks_url", `svc.toml: sdk.jwks_url: must not carry credentials, got "https://u:xxxxx@idp.example.com/jwks"`},
		{"issuer_url beside jwks_url", func(c *Config) { c.JWT.IssuerURL = "https://idp.example.com" }, "SVC_JWT_ISSUER_URL",
			"jwt.issuer_url", "SVC_JWT_ISSUER_URL: must not be set together with sdk.jwks_url (svc.toml): the keys come from the issuer's discovery document; set one of them"},
		{"issuer_url public http", func(c *Config) { c.SDK.JWKSURL, c.JWT.IssuerURL = "", "http://idp.example.com" }, "",
			"jwt.issuer_url", "svc.toml: jwt.issuer_url: must use https (http only on a loopback host), got \"http://idp.example.com\""},
		{"issuer differs from issuer_url", func(c *Config) {
			c.SDK.JWKSURL, c.JWT.IssuerURL, c.JWT.Issuer = "", "https://idp.example.com", "https://idp.example.com/"
		}, "", "jwt.issuer", "svc.toml: jwt.issuer: \"https://idp.example.com/\" differs from jwt.issuer_url \"https://idp.example.com\": tokens must carry the issuer URL as iss; unset jwt.issuer or make them equal"},
		{"issuers beside jwks_url", func(c *Config) {
			c.JWT.Issuers = []JWTIssuer{{IssuerURL: "https://a.example.com"}}
		}, "", "sdk.jwks_url", "svc.toml: sdk.jwks_url: must be empty with [[jwt.issuers]]: each provider is set in its own [[jwt.issuers]] table"},
		{"issuers entry without keys", func(c *Config) {
			c.SDK.JWKSURL, c.JWT.Issuers = "", []JWTIssuer{{IssuerURL: "https://a.example.com"}, {Issuer: "b"}}
		}, "", "jwt.issuers[1]", "svc.toml: jwt.issuers[1]: needs issuer_url, or issuer and jwks_url"},
		{"issuers entry with both", func(c *Config) {
			c.SDK.JWKSURL, c.JWT.Issuers = "", []JWTIssuer{{IssuerURL: "https://a.example.com", JWKSURL: "https://a.example.com/k"}}
		}, "", "jwt.issuers[0].issuer_url", "svc.toml: jwt.issuers[0].issuer_url: must not be set together with issuer or jwks_url: the keys come from the issuer's discovery document"},
		{"issuers same iss", func(c *Config) {
			c.SDK.JWKSURL, c.JWT.Issuers = "", []JWTIssuer{{IssuerURL: "https://a.example.com"}, {Issuer: "https://a.example.com", JWKSURL: "https://a.example.com/k"}}
		}, "", "jwt.issuers[1].issuer", "svc.toml: jwt.issuers[1].issuer: \"https://a.example.com\" is also the issuer of jwt.issuers[0]: a token is routed by its iss, which must name one provider"},
		{"issuers tenant and tenant_claim", func(c *Config) {
			c.SDK.JWKSURL, c.JWT.Issuers = "", []JWTIssuer{{IssuerURL: "https://a.example.com", Tenant: "acme", TenantClaim: "org"}}
		}, "", "jwt.issuers[0].tenant", "svc.toml: jwt.issuers[0].tenant: must not be set together with tenant_claim: a fixed tenant reads no claim"},
		{"sidecar_addr without port", func(c *Config) { c.SDK.SidecarAddr = "[::1]" }, "",
			"sdk.sidecar_addr", `svc.toml: sdk.sidecar_addr: must be host:port, got "[::1]"`},
		{"sidecar_addr named port", func(c *Config) { c.SDK.SidecarAddr = "localhost:grpc" }, "SVC_SIDECAR_ADDR",
			"sdk.sidecar_addr", `SVC_SIDECAR_ADDR: port must be a number from 0 to 65535, got "grpc"`},
		{"http_addr port out of range", func(c *Config) { c.Sidecar.HTTPAddr = "127.0.0.1:65536" }, "",
			"sidecar.http_addr", `svc.toml: sidecar.http_addr: port must be a number from 0 to 65535, got "65536"`},
		{"http_addr signed port", func(c *Config) { c.Sidecar.HTTPAddr = "127.0.0.1:+80" }, "",
			"sidecar.http_addr", `svc.toml: sidecar.http_addr: port must be a number from 0 to 65535, got "+80"`},
		{"bundle_url without a verification key", func(c *Config) { c.Policy.BundleURL = "https://cp.example.com/b.tar.gz" }, "SVC_BUNDLE_URL",
			"policy.bundle_url", "SVC_BUNDLE_URL: requires policy.bundle_verify_key_file: bundles from a control plane are always verified"},
		{"bundle_url public http", func(c *Config) {
			c.Policy.BundleURL, c.Policy.BundleVerifyKeyFile = "http://cp.example.com/b.tar.gz", "/k.pem"
		}, "", "policy.bundle_url", `svc.toml: policy.bundle_url: must use https (http only on a loopback host), got "http://cp.example.com/b.tar.gz"`},
		{"bundle poll bounds", func(c *Config) { c.Policy.BundleMinPoll = Duration{3 * time.Minute} }, "",
			"policy.bundle_min_poll", "svc.toml: policy.bundle_min_poll: must not exceed policy.bundle_max_poll (3m0s > 2m0s)"},
		{"bundle max age negative", func(c *Config) { c.Policy.BundleMaxAge = Duration{-time.Hour} }, "",
			"policy.bundle_max_age", `svc.toml: policy.bundle_max_age: must not be negative (0 turns the check off), got "-1h0m0s"`},
		{"bundle max age action unknown", func(c *Config) { c.Policy.BundleMaxAgeAction = "deny" }, "",
			"policy.bundle_max_age_action", `svc.toml: policy.bundle_max_age_action: must be "degrade" or "refuse", got "deny"`},
		{"bundle max age refused without a max age", func(c *Config) { c.Policy.BundleMaxAgeAction = BundleMaxAgeRefuse }, "SVC_BUNDLE_MAX_AGE_ACTION",
			"policy.bundle_max_age_action", `SVC_BUNDLE_MAX_AGE_ACTION: "refuse" requires policy.bundle_max_age: without a maximum age no bundle is too old`},
		{"dry-run eval timeout too long", func(c *Config) { c.Policy.DryRunEvalTimeout = Duration{time.Minute} }, "",
			"policy.dry_run_eval_timeout", `svc.toml: policy.dry_run_eval_timeout: must be positive and at most 10s, got "1m0s"`},
		{"dry-run eval timeout negative", func(c *Config) { c.Policy.DryRunEvalTimeout = Duration{-time.Second} }, "",
			"policy.dry_run_eval_timeout", `svc.toml: policy.dry_run_eval_timeout: must be positive and at most 10s, got "-1s"`},
		{"decision cache too small", func(c *Config) { c.Policy.DecisionCacheSize = 8 }, "",
			"policy.decision_cache_size", `svc.toml: policy.decision_cache_size: must be between 16 and 4194304 entries, got 8`},
		{"tls key without cert", func(c *Config) { c.Sidecar.TLSKeyFile = "/k.pem" }, "",
			"sidecar.tls_cert_file", "svc.toml: sidecar.tls_cert_file: sidecar.tls_cert_file and sidecar.tls_key_file must be set together"},
		{"admin token required without a token file", func(c *Config) { c.Sidecar.AdminRequireToken = true }, "SVC_ADMIN_REQUIRE_TOKEN",
			"sidecar.admin_require_token", "SVC_ADMIN_REQUIRE_TOKEN: admin_require_token=true requires sidecar.admin_token_file: no caller could use the admin endpoints"},
		{"client CA without TLS", func(c *Config) { c.Sidecar.TLSClientCAFile = "/ca.pem" }, "SVC_TLS_CLIENT_CA_FILE",
			"sidecar.tls_client_ca_file", "SVC_TLS_CLIENT_CA_FILE: requires sidecar.tls_cert_file and sidecar.tls_key_file: client certificates are asked for over TLS"},
		{"socket mode not octal", func(c *Config) { c.Sidecar.SocketMode = "rw-rw----" }, "",
			"sidecar.socket_mode", `svc.toml: sidecar.socket_mode: must be an octal file mode such as "0660", got "rw-rw----"`},
		{"unix socket relative", func(c *Config) { c.Sidecar.HTTPAddr = "unix://run/svc.sock" }, "",
			"sidecar.http_addr", `svc.toml: sidecar.http_addr: a Unix socket address must be unix:// and an absolute path, got "unix://run/svc.sock"`},
		{"allowed host with port", func(c *Config) { c.Sidecar.AllowedHosts = []string{"svc:7700"} }, "",
			"sidecar.allowed_hosts[0]", `svc.toml: sidecar.allowed_hosts[0]: must be a host name without port, got "svc:7700"`},
		{"trusted proxy not a CIDR", func(c *Config) { c.Sidecar.TrustedProxies = []string{"10.0.0.0/8", "nginx"} }, "",
			"sidecar.trusted_proxies[1]", `svc.toml: sidecar.trusted_proxies[1]: must be a CIDR such as "10.0.0.0/8" or an IP address, got "nginx"`},
		{"trusted proxy prefix too long", func(c *Config) { c.Sidecar.TrustedProxies = []string{"10.0.0.0/33"} }, "SVC_TRUSTED_PROXIES",
			"sidecar.trusted_proxies[0]", `SVC_TRUSTED_PROXIES: sidecar.trusted_proxies[0]: must be a CIDR such as "10.0.0.0/8" or an IP address, got "10.0.0.0/33"`},
		{"log level", func(c *Config) { c.Log.Level = "INFO" }, "SVC_LOG_LEVEL",
			"log.level", `SVC_LOG_LEVEL: must be one of trace, debug, info, warn, error, got "INFO"`},
		{"default_rpm negative", func(c *Config) { c.RateLimit.DefaultRPM = -5 }, "",
			"rate_limit.default_rpm", "svc.toml: rate_limit.default_rpm: must not be negative, got -5"},
		{"client_certs trust domain with a port", func(c *Config) {
			c.ClientCerts.TrustDomains = map[string]string{"acme.example:8443": "acme"}
		}, "", `client_certs.trust_domains."acme.example:8443"`,
			`svc.toml: client_certs.trust_domains."acme.example:8443": must be a SPIFFE trust domain (lower-case letters, digits, '.', '-', '_'), got "acme.example:8443"`},
		{"client_certs empty tenant", func(c *Config) { c.ClientCerts.TrustDomains = map[string]string{"acme.example": " "} }, "",
			`client_certs.trust_domains."acme.example"`, `svc.toml: client_certs.trust_domains."acme.example": tenant id must not be empty`},
		{"client_certs role of a bad id", func(c *Config) {
			c.ClientCerts.TrustDomains = map[string]string{"acme.example": "acme"}
			c.ClientCerts.Roles = map[string][]string{"spiffe://acme.example": {"viewer"}}
		}, "", `client_certs.roles."spiffe://acme.example"`,
			`svc.toml: client_certs.roles."spiffe://acme.example": must be a workload's SPIFFE ID such as "spiffe://acme.example/ns/x/sa/y", got "spiffe://acme.example"`},
		{"client_certs role of an unmapped trust domain", func(c *Config) {
			c.ClientCerts.TrustDomains = map[string]string{"acme.example": "acme"}
			c.ClientCerts.Roles = map[string][]string{"spiffe://other.example/x": {"viewer"}}
		}, "", `client_certs.roles."spiffe://other.example/x"`,
			`svc.toml: client_certs.roles."spiffe://other.example/x": trust domain "other.example" is not in client_certs.trust_domains: no certificate of it is accepted`},
		{"client_certs empty role", func(c *Config) {
			c.ClientCerts.TrustDomains = map[string]string{"acme.example": "acme"}
			c.ClientCerts.Roles = map[string][]string{"spiffe://acme.example/x": {""}}
		}, "", `client_certs.roles."spiffe://acme.example/x"`,
			`svc.toml: client_certs.roles."spiffe://acme.example/x": a role must not be empty`},
		{"per_tenant negative", func(c *Config) { c.RateLimit.PerTenant["AcMe"] = -1 }, "",
			"rate_limit.per_tenant.AcMe", "svc.toml: rate_limit.per_tenant.AcMe: must not be negative, got -1"},
		{"per_tenant empty id", func(c *Config) { c.RateLimit.PerTenant[""] = 3 }, "",
			`rate_limit.per_tenant.""`, `svc.toml: rate_limit.per_tenant."": tenant id must not be empty`},
		{"tenant empty id", func(c *Config) { c.Tenants[" "] = Tenant{} }, "",
			`tenants." "`, `svc.toml: tenants." ": tenant id must not be empty`},
		{"redis_addr", func(c *Config) { c.RateLimit.RedisAddr = "redis" }, "SVC_REDIS_ADDR",
			"rate_limit.redis_addr", `SVC_REDIS_ADDR: must be host:port, got "redis"`},
		{"redis_timeout negative", func(c *Config) { c.RateLimit.RedisTimeout = dur(-time.Second) }, "SVC_REDIS_TIMEOUT",
			"rate_limit.redis_timeout", `SVC_REDIS_TIMEOUT: must be positive, got "-1s"`},
		{"redis_fallback unknown", func(c *Config) { c.RateLimit.RedisFallback = "open" }, "SVC_RATE_LIMIT_REDIS_FALLBACK",
			"rate_limit.redis_fallback", `SVC_RATE_LIMIT_REDIS_FALLBACK: must be "local", "allow" or "deny", got "open"`},
		{"redis_tls_ca_file without redis_tls", func(c *Config) { c.RateLimit.RedisTLSCAFile = "/etc/ca.pem" }, "SVC_REDIS_TLS_CA_FILE",
			"rate_limit.redis_tls_ca_file", `SVC_REDIS_TLS_CA_FILE: needs rate_limit.redis_tls = true (SVC_REDIS_TLS): the authorities verify a TLS connection`},
		{"redis_username without a password", func(c *Config) { c.RateLimit.RedisUsername = "svc" }, "",
			"rate_limit.redis_password_file", `svc.toml: rate_limit.redis_password_file: rate_limit.redis_username = "svc" needs a password file`},
		{"redis_password_file without redis_addr", func(c *Config) {
			c.RateLimit.RedisAddr, c.RateLimit.RedisPasswordFile = "", "/run/secrets/redis"
		}, "SVC_REDIS_PASSWORD_FILE",
			"rate_limit.redis_password_file", `SVC_REDIS_PASSWORD_FILE: is set without rate_limit.redis_addr (SVC_REDIS_ADDR)`},
		{"replicas zero", func(c *Config) { c.RateLimit.Replicas = -2 }, "",
			"rate_limit.replicas", "svc.toml: rate_limit.replicas: must be at least 1, got -2"},
		{"cache_size", func(c *Config) { c.JWT.CacheSize = -3 }, "",
			"jwt.cache_size", "svc.toml: jwt.cache_size: must be positive, got -3"},
		{"min over max refresh", func(c *Config) { c.JWT.JWKSMinRefresh = dur(2 * time.Hour) }, "",
			"jwt.jwks_min_refresh", "svc.toml: jwt.jwks_min_refresh: must not exceed jwt.jwks_max_refresh (2h0m0s > 1h0m0s)"},
		{"negative clock skew", func(c *Config) { c.JWT.ClockSkew = dur(-time.Second) }, "",
			"jwt.clock_skew", `svc.toml: jwt.clock_skew: must not be negative, got "-1s"`},
		{"zero fetch timeout", func(c *Config) { c.JWT.JWKSFetchTimeout = dur(0) }, "",
			"jwt.jwks_fetch_timeout", "svc.toml: jwt.jwks_fetch_timeout: must be positive"},
		{"empty audience", func(c *Config) { c.JWT.Audiences = []string{"a", ""} }, "",
			"jwt.audiences[1]", "svc.toml: jwt.audiences[1]: must not be empty"},
		{"empty accepted tenant", func(c *Config) { c.SDK.AcceptedTenants = []string{"globex", " "} }, "",
			"sdk.accepted_tenants[1]", "svc.toml: sdk.accepted_tenants[1]: must not be empty"},
		{"empty allowed typ", func(c *Config) { c.JWT.AllowedTyp = []string{""} }, "",
			"jwt.allowed_typ[0]", "svc.toml: jwt.allowed_typ[0]: must not be empty"},
		{"negative cache max age", func(c *Config) { c.JWT.CacheMaxAge = dur(-time.Second) }, "",
			"jwt.cache_max_age", `svc.toml: jwt.cache_max_age: must not be negative, got "-1s"`},
		{"check proxy", func(c *Config) { c.Sidecar.CheckProxy = "Nginx" }, "SVC_CHECK_PROXY",
			"sidecar.check_proxy", `SVC_CHECK_PROXY: must be "auto", "nginx", "forwarded" or "envoy", got "Nginx"`},
		{"format suffix with dot", func(c *Config) { c.Envoy.FormatSuffixes = []string{"json", ".PDF"} }, "",
			"envoy.format_suffixes[1]", `svc.toml: envoy.format_suffixes[1]: must be lower-case letters and digits without the dot, such as "json", got ".PDF"`},
		{"negative drain", func(c *Config) { c.Sidecar.DrainTimeout = dur(-time.Second) }, "",
			"sidecar.drain_timeout", `svc.toml: sidecar.drain_timeout: must not be negative, got "-1s"`},
		{"route path relative", func(c *Config) { c.Sidecar.Routes[0].Path = "api" }, "",
			"sidecar.routes[0].path", `svc.toml: sidecar.routes[0].path: must start with "/", got "api"`},
		{"route path empty placeholder", func(c *Config) { c.Sidecar.Routes[0].Path = "/a/{}/b" }, "",
			"sidecar.routes[0].path", `svc.toml: sidecar.routes[0].path: placeholder must have a name, got "/a/{}/b"`},
		{"route path unclosed", func(c *Config) { c.Sidecar.Routes[0].Path = "/a/{id" }, "",
			"sidecar.routes[0].path", `svc.toml: sidecar.routes[0].path: unclosed "{", got "/a/{id"`},
		{"route path nested", func(c *Config) { c.Sidecar.Routes[0].Path = "/a/{b{c}}" }, "",
			"sidecar.routes[0].path", `svc.toml: sidecar.routes[0].path: placeholders must not nest, got "/a/{b{c}}"`},
		{"route path stray brace", func(c *Config) { c.Sidecar.Routes[0].Path = "/a}" }, "",
			"sidecar.routes[0].path", `svc.toml: sidecar.routes[0].path: unbalanced "}", got "/a}"`},
		{"route method", func(c *Config) {
			c.Sidecar.Routes = append(c.Sidecar.Routes, Route{Path: "/b", Methods: []string{"POST", "get"}})
		}, "",
			"sidecar.routes[1].methods[1]", `svc.toml: sidecar.routes[1].methods[1]: must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, CONNECT, TRACE, got "get"`},
		{"audit destination empty", func(c *Config) { c.Audit.Destination = "" }, "SVC_AUDIT_DESTINATION",
			"audit.destination", `SVC_AUDIT_DESTINATION: must be "stdout", "stderr", "off" or a file path`},
		{"audit queue", func(c *Config) { c.Audit.QueueSize = -1 }, "",
			"audit.queue_size", "svc.toml: audit.queue_size: must be positive, got -1"},
		{"decision log sink unknown", func(c *Config) { c.DecisionLog.Sink = "kafka2" }, "SVC_DECISION_LOG_SINK",
			"decision_log.sink", `SVC_DECISION_LOG_SINK: must be one of "off", "nats", "kafka", "otlp" or "http", got "kafka2"`},
		{"decision log nats without url", func(c *Config) { c.DecisionLog = natsLog(""); c.DecisionLog.URL = "" }, "",
			"decision_log.url", `svc.toml: decision_log.url: decision_log.sink = "nats" needs a url (nats://host:port or tls://host:port)`},
		{"decision log url not nats", func(c *Config) { c.DecisionLog = natsLog("http://nats:4222/?token=s3cret") }, "",
			"decision_log.url", `svc.toml: decision_log.url: must be nats://host:port or tls://host:port, got "http://nats:4222/"`},
		{"decision log otlp url not http", func(c *Config) { c.DecisionLog = natsLog("grpc://collector:4317"); c.DecisionLog.Sink = "otlp" }, "",
			"decision_log.url", `svc.toml: decision_log.url: must be an OTLP gRPC endpoint, http://host:port or https://host:port, got "grpc://collector:4317"`},
		{"decision log otlp url with a path", func(c *Config) { c.DecisionLog = natsLog("http://collector:4318/v1/logs"); c.DecisionLog.Sink = "otlp" }, "",
			"decision_log.url", `svc.toml: decision_log.url: must be an OTLP gRPC endpoint without a path (the OTLP/HTTP path /v1/logs is not served over gRPC), got "http://collector:4318/v1/logs"`},
		{"decision log url with credentials", func(c *Config) { c.DecisionLog = natsLog("nats://user:s3cret@nats:4222") }, "",
			"decision_log.url", `svc.toml: decision_log.url: must not carry credentials: secrets are never inline in the configuration`},
		{"decision log without spool", func(c *Config) { c.DecisionLog = natsLog("nats://nats:4222"); c.DecisionLog.SpoolDir = "" }, "",
			"decision_log.spool_dir", `svc.toml: decision_log.spool_dir: decision_log.sink = "nats" needs a spool_dir: records wait there until the sink acknowledges them`},
		{"decision log overflow", func(c *Config) { c.DecisionLog = natsLog("nats://nats:4222"); c.DecisionLog.Overflow = "block" }, "",
			"decision_log.overflow", `svc.toml: decision_log.overflow: must be "drop_oldest" or "deny", got "block"`},
		{"decision log tiny spool", func(c *Config) { c.DecisionLog = natsLog("nats://nats:4222"); c.DecisionLog.SpoolMaxBytes = 4096 }, "",
			"decision_log.spool_max_bytes", `svc.toml: decision_log.spool_max_bytes: must be at least 1 MiB (1048576), got 4096`},
		{"decision log wildcard subject", func(c *Config) { c.DecisionLog = natsLog("nats://nats:4222"); c.DecisionLog.Subject = "svc.>" }, "",
			"decision_log.subject", `svc.toml: decision_log.subject: must be a NATS subject without spaces or wildcards, got "svc.>"`},
		{"decision log kafka url not kafka", func(c *Config) { c.DecisionLog = sinkLog(DecisionLogKafka, "nats://b1:9092") }, "",
			"decision_log.url", `svc.toml: decision_log.url: must be kafka://host:port[,host:port...] or kafkas:// (TLS), got "nats://b1:9092"`},
		{"decision log kafka url empty broker", func(c *Config) { c.DecisionLog = sinkLog(DecisionLogKafka, "kafka://,b1:9092") }, "",
			"decision_log.url", `svc.toml: decision_log.url: must be kafka://host:port[,host:port...] or kafkas:// (TLS), got "kafka://,b1:9092"`},
		{"decision log kafka PLAIN in clear", func(c *Config) {
			c.DecisionLog = sinkLog(DecisionLogKafka, "kafka://127.0.0.1:9092,b1.example.com:9092")
			c.DecisionLog.KafkaSASLMechanism, c.DecisionLog.KafkaSASLUsername, c.DecisionLog.KafkaSASLPasswordFile = "PLAIN", "svc", "/run/secrets/kafka"
		}, "",
			"decision_log.url", `svc.toml: decision_log.url: must be kafkas:// with kafka_sasl_mechanism = "PLAIN" (kafka:// only to loopback brokers): the password would cross the network in clear, got "kafka://127.0.0.1:9092,b1.example.com:9092"`},
		{"decision log kafka SASL unknown", func(c *Config) {
			c.DecisionLog = sinkLog(DecisionLogKafka, "kafkas://b1:9093")
			c.DecisionLog.KafkaSASLMechanism = "GSSAPI"
		}, "",
			"decision_log.kafka_sasl_mechanism", `svc.toml: decision_log.kafka_sasl_mechanism: must be "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512", got "GSSAPI"`},
		{"decision log kafka SASL without password", func(c *Config) {
			c.DecisionLog = sinkLog(DecisionLogKafka, "kafkas://b1:9093")
			c.DecisionLog.KafkaSASLMechanism, c.DecisionLog.KafkaSASLUsername = "SCRAM-SHA-256", "svc"
		}, "",
			"decision_log.kafka_sasl_password_file", `svc.toml: decision_log.kafka_sasl_password_file: decision_log.kafka_sasl_mechanism = "SCRAM-SHA-256" needs a password file`},
		{"decision log kafka SASL user without mechanism", func(c *Config) {
			c.DecisionLog = sinkLog(DecisionLogKafka, "kafkas://b1:9093")
			c.DecisionLog.KafkaSASLUsername = "svc"
		}, "",
			"decision_log.kafka_sasl_mechanism", `svc.toml: decision_log.kafka_sasl_mechanism: must name a mechanism ("PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512") when kafka_sasl_username or kafka_sasl_password_file is set`},
		{"decision log kafka topic", func(c *Config) {
			c.DecisionLog = sinkLog(DecisionLogKafka, "kafka://b1:9092")
			c.DecisionLog.KafkaTopic = "svc/decisions"
		}, "",
			"decision_log.kafka_topic", `svc.toml: decision_log.kafka_topic: must be a Kafka topic name of at most 249 letters, digits, '.', '_' or '-', got "svc/decisions"`},
		{"decision log http url not http", func(c *Config) { c.DecisionLog = sinkLog(DecisionLogHTTP, "kafka://logs.example.com") }, "",
			"decision_log.url", `svc.toml: decision_log.url: must be https://host/path or http://host/path, got "kafka://logs.example.com"`},
		{"decision log http token in clear", func(c *Config) {
			c.DecisionLog = sinkLog(DecisionLogHTTP, "http://logs.example.com/v1")
			c.DecisionLog.HTTPTokenFile = "/run/secrets/logs-token"
		}, "",
			"decision_log.url", `svc.toml: decision_log.url: must use https with decision_log.http_token_file (http only on a loopback host): the token would cross the network in clear, got "http://logs.example.com/v1"`},
		{"decision log mask not a pointer", func(c *Config) { c.DecisionLog.Mask = []string{"/user_id", "input/password"} }, "",
			"decision_log.mask", `svc.toml: decision_log.mask: pointer 2, "input/password" must start with "/" (a JSON pointer such as "/input/request/headers/x-ssn")`},
		{"decision log mask bad escape", func(c *Config) { c.DecisionLog.Mask = []string{"/input/a~2b"} }, "SVC_DECISION_LOG_MASK",
			"decision_log.mask", `SVC_DECISION_LOG_MASK: pointer 1, "/input/a~2b" has a "~" that is not "~0" (for "~") or "~1" (for "/")`},
		{"decision log mask erases the decision id", func(c *Config) { c.DecisionLog.Mask = []string{"/user_id", "/decision_id"} }, "",
			"decision_log.mask", `svc.toml: decision_log.mask: pointer 2, "/decision_id" names the record's decision_id, which no mask erases: consumers de-duplicate records by it`},
		{"decision log mask under the decision id", func(c *Config) { c.DecisionLog.Mask = []string{"/decision_id/0"} }, "SVC_DECISION_LOG_MASK",
			"decision_log.mask", `SVC_DECISION_LOG_MASK: pointer 1, "/decision_id/0" names the record's decision_id, which no mask erases: consumers de-duplicate records by it`},
		{"saml entity_id missing", func(c *Config) { c.SDK.SAML.EntityID = "" }, "",
			"sdk.saml.entity_id", "svc.toml: sdk.saml.entity_id: must be set when [sdk.saml] is present"},
		{"saml entity_id unparseable", func(c *Config) { c.SDK.SAML.EntityID = "https://app.example.com/%zz" }, "",
			"sdk.saml.entity_id", `svc.toml: sdk.saml.entity_id: must be a URL: invalid URL escape "%zz"`},
		{"saml default_return_to absolute URL", func(c *Config) { c.SDK.SAML.DefaultReturnTo = "https://evil.example/" }, "",
			"sdk.saml.default_return_to", `svc.toml: sdk.saml.default_return_to: must be a relative path on this site, such as /home, got "https://evil.example/"`},
		{"saml default_return_to protocol-relative", func(c *Config) { c.SDK.SAML.DefaultReturnTo = "//evil.example/x" }, "",
			"sdk.saml.default_return_to", `svc.toml: sdk.saml.default_return_to: must be a relative path on this site, such as /home, got "//evil.example/x"`},
		{"saml default_return_to backslash", func(c *Config) { c.SDK.SAML.DefaultReturnTo = "/\\evil.example" }, "SVC_SAML_DEFAULT_RETURN_TO",
			"sdk.saml.default_return_to", `SVC_SAML_DEFAULT_RETURN_TO: must be a relative path on this site, such as /home, got "/\\evil.example"`},
		{"saml default_return_to not a path", func(c *Config) { c.SDK.SAML.DefaultReturnTo = "home" }, "",
			"sdk.saml.default_return_to", `svc.toml: sdk.saml.default_return_to: must be a relative path on this site, such as /home, got "home"`},
		{"saml acs_url relative", func(c *Config) { c.SDK.SAML.ACSURL = "/auth/saml/acs" }, "",
			"sdk.saml.acs_url", `svc.toml: sdk.saml.acs_url: must be an absolute http(s) URL with a host, got "/auth/saml/acs"`},
		{"saml metadata over public http", func(c *Config) { c.SDK.SAML.IDPMetadataURL = "http://idp.example.com/md" }, "",
			"sdk.saml.idp_metadata_url", `svc.toml: sdk.saml.idp_metadata_url: must use https (http only on a loopback host), got "http://idp.example.com/md"`},
		{"saml clock skew", func(c *Config) { c.SDK.SAML.ClockSkewSeconds = -1 }, "",
			"sdk.saml.clock_skew_seconds", "svc.toml: sdk.saml.clock_skew_seconds: must be from 0 to 3600, got -1"},
		{"saml no metadata", func(c *Config) { c.SDK.SAML.IDPMetadataURL = "" }, "",
			"sdk.saml.idp_metadata_url", "svc.toml: sdk.saml.idp_metadata_url: one of sdk.saml.idp_metadata_url and sdk.saml.idp_metadata_file must be set when [sdk.saml] is present"},
		{"saml both metadata", func(c *Config) { c.SDK.SAML.IDPMetadataFile = "/md.xml" }, "",
			"sdk.saml.idp_metadata_file", "svc.toml: sdk.saml.idp_metadata_file: must not be set together with sdk.saml.idp_metadata_url"},
		{"saml token ttl", func(c *Config) { c.SDK.SAML.TokenTTL = Duration{48 * time.Hour} }, "",
			"sdk.saml.token_ttl", `svc.toml: sdk.saml.token_ttl: must be positive and at most 24h0m0s, got "48h0m0s"`},
		{"saml cookie name", func(c *Config) { c.SDK.SAML.CookieName = "a b" }, "",
			"sdk.saml.cookie_name", `svc.toml: sdk.saml.cookie_name: must be a cookie name (letters, digits, '-', '_', '.'), got "a b"`},
		{"saml cookie name with the prefix", func(c *Config) { c.SDK.SAML.CookieName = "__Host-svc_session" }, "",
			"sdk.saml.cookie_name", `svc.toml: sdk.saml.cookie_name: must not start with __Host- or __Secure-: the gateway names its cookies __Host-<cookie_name> wherever they are Secure, got "__Host-svc_session"`},
		{"saml cookie name with a prefix in another case", func(c *Config) { c.SDK.SAML.CookieName = "__secure-s" }, "",
			"sdk.saml.cookie_name", `svc.toml: sdk.saml.cookie_name: must not start with __Host- or __Secure-: the gateway names its cookies __Host-<cookie_name> wherever they are Secure, got "__secure-s"`},
		{"saml path prefix", func(c *Config) { c.SDK.SAML.PathPrefix = "/auth/saml/" }, "",
			"sdk.saml.path_prefix", `svc.toml: sdk.saml.path_prefix: must be an absolute path without a trailing slash, got "/auth/saml/"`},
		{"saml acs_max_concurrent", func(c *Config) { c.SDK.SAML.ACSMaxConcurrent = -1 }, "",
			"sdk.saml.acs_max_concurrent", "svc.toml: sdk.saml.acs_max_concurrent: must be from 1 to 4096, got -1"},
		{"saml acs_timeout", func(c *Config) { c.SDK.SAML.ACSTimeout = Duration{time.Hour} }, "",
			"sdk.saml.acs_timeout", `svc.toml: sdk.saml.acs_timeout: must be positive and at most 5m, got "1h0m0s"`},
		{"saml addr", func(c *Config) { c.Sidecar.SAMLAddr = "7701" }, "",
			"sidecar.saml_addr", `svc.toml: sidecar.saml_addr: must be host:port, got "7701"`},
		{"saml idp-initiated without redis", func(c *Config) { c.SDK.SAML.AllowIDPInitiated = true; c.RateLimit.RedisAddr = "" }, "",
			"sdk.saml.allow_idp_initiated", "svc.toml: sdk.saml.allow_idp_initiated: " + idpInitiatedWithoutRedis("sdk.jwks_url (svc.toml) is set")},
		{"saml idp-initiated without redis, SAML only, public sign-in", func(c *Config) {
			c.SDK.SAML.AllowIDPInitiated = true
			c.RateLimit.RedisAddr, c.SDK.JWKSURL, c.Sidecar.SAMLAddr = "", "", "0.0.0.0:7701"
		}, "SVC_SAML_ALLOW_IDP_INITIATED",
			"sdk.saml.allow_idp_initiated", "SVC_SAML_ALLOW_IDP_INITIATED: " +
				idpInitiatedWithoutRedis(`sidecar.saml_addr (svc.toml) "0.0.0.0:7701" is not a loopback address`)},
		{"saml idp-initiated without redis, jwks_url, fail open", func(c *Config) {
			c.SDK.SAML.AllowIDPInitiated = true
			c.RateLimit.RedisAddr, c.SDK.FailMode = "", FailOpen
		}, "",
			"sdk.saml.allow_idp_initiated", "svc.toml: sdk.saml.allow_idp_initiated: " + idpInitiatedWithoutRedis("sdk.jwks_url (svc.toml) is set")},
		{"saml attribute blank", func(c *Config) { c.SDK.SAML.AttributeMapping.Role = " " }, "",
			"sdk.saml.attribute_mapping.role", "svc.toml: sdk.saml.attribute_mapping.role: must name a SAML attribute"},
		{"invalid utf-8", func(c *Config) { c.Tenants["acme"] = Tenant{Plan: "\xff"} }, "",
			"tenants.acme.plan", "svc.toml: tenants.acme.plan: must be valid UTF-8 text"},
		{"built in code", func(c *Config) { c.Source = ""; c.Log.Level = "loud" }, "",
			"log.level", `log.level: must be one of trace, debug, info, warn, error, got "loud"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c)
			wantSource := c.Source
			if tt.env != "" {
				c.Overrides = map[string]string{tt.key: tt.env}
				wantSource = tt.env
			}
			err := c.Validate()
			errs := Errors(err)
			if len(errs) != 1 {
				t.Fatalf("Validate = %v, want exactly one error", err)
			}
			e := errs[0]
			if e.Key != tt.key || e.Source != wantSource {
				t.Errorf("Key, Source = %q, %q; want %q, %q", e.Key, e.Source, tt.key, wantSource)
			}
			if e.Error() != tt.want {
				t.Errorf("Error() = %q\nwant      %q", e.Error(), tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Error("errors.Is(err, ErrInvalid) = false")
			}
			var ce *Error
			if !errors.As(err, &ce) || ce != e {
				t.Error("errors.As does not find the *Error")
			}
		})
	}
}

// idpInitiatedWithoutRedis is the refusal of allow_idp_initiated without
// Redis in a configuration that why makes a production one.
func idpInitiatedWithoutRedis(why string) string {
	return "true requires rate_limit.redis_addr (SVC_REDIS_ADDR) outside a local trial (every listener: sdk.sidecar_addr, sidecar.http_addr, " +
		"sidecar.saml_addr, on a loopback address or a Unix socket, and no identity source but [sdk.saml]: no sdk.jwks_url, no jwt.issuer_url, no jwt.issuers, no api_keys.file, no client_certs.trust_domains, no introspection.url, no sdk.oidc); here " +
		why + ": without Redis the assertion replay cache is per process, so a replica or a restart would accept an unsolicited assertion again"
}

func TestValidateReportsAll(t *testing.T) {
	c := validConfig()
	c.SDK.FailMode = "x"
	c.Log.Level = "y"
	c.Sidecar.HTTPAddr = "z"
	err := c.Validate()
	if got := len(Errors(err)); got != 3 {
		t.Fatalf("Validate = %v: %d errors, want 3", err, got)
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"all parts", &Error{Source: "svc.toml", Line: 3, Column: 7, Key: "sdk.x", Msg: "unknown key"}, "svc.toml:3:7: sdk.x: unknown key"},
		{"line only", &Error{Source: "svc.yaml", Line: 3, Msg: "bad"}, "svc.yaml:3: bad"},
		{"no source", &Error{Key: "log.level", Msg: "bad"}, "log.level: bad"},
		{"env names its key", &Error{Source: "SVC_LOG_LEVEL", Key: "log.level", Msg: "bad"}, "SVC_LOG_LEVEL: bad"},
		{"env with another key", &Error{Source: "SVC_FAIL_MODE", Key: "sdk.jwks_url", Msg: "bad"}, "SVC_FAIL_MODE: sdk.jwks_url: bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestKeyPath(t *testing.T) {
	tests := []struct {
		segs []string
		want string
	}{
		{[]string{"sdk", "fail_mode"}, "sdk.fail_mode"},
		{[]string{"tenants", "AcMe", "plan"}, "tenants.AcMe.plan"},
		{[]string{"tenants", "a.b"}, `tenants."a.b"`},
		{[]string{"rate_limit", "per_tenant", ""}, `rate_limit.per_tenant.""`},
		{[]string{"sidecar", "routes", "[2]", "methods", "[0]"}, "sidecar.routes[2].methods[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := keyPath(tt.segs...); got != tt.want {
				t.Errorf("keyPath(%q) = %q, want %q", tt.segs, got, tt.want)
			}
		})
	}
}

// natsLog is a valid [decision_log] shipping to NATS at url.
func natsLog(url string) DecisionLog { return sinkLog(DecisionLogNATS, url) }

// sinkLog is a valid [decision_log] shipping to sink at url.
func sinkLog(sink, url string) DecisionLog {
	d := DecisionLog{Sink: sink, URL: url, SpoolDir: "/var/lib/svc/spool"}
	d.setDefaults()
	return d
}
