package config

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// noEnv is an environment with no variables set.
func noEnv(string) (string, bool) { return "", false }

// envOf returns a lookup function over m.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func dur(d time.Duration) Duration { return Duration{d} }

func TestLoadDefaults(t *testing.T) {
	cfg, err := Load("", noEnv)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Config{
		Source: "defaults",
		SDK:    SDK{SidecarAddr: "[::1]:50051", TenantID: DevTenant, ServiceName: "svc-sidecar", FailMode: "open"},
		JWT: JWT{ClockSkew: dur(30 * time.Second), CacheSize: 20000, CacheMaxAge: dur(10 * time.Minute), JWKSFetchTimeout: dur(5 * time.Second),
			JWKSMinRefresh: dur(time.Minute), JWKSMaxRefresh: dur(time.Hour)},
		RateLimit: RateLimit{DefaultRPM: 1000, RedisTimeout: dur(50 * time.Millisecond), RedisFallback: "local", Replicas: 1},
		Sidecar:   Sidecar{HTTPAddr: "127.0.0.1:7700", DrainTimeout: dur(30 * time.Second), CheckProxy: "auto", SAMLAddr: "127.0.0.1:7701", SigninAddr: "127.0.0.1:7701", SocketMode: "0660"},
		Envoy:     Envoy{FormatSuffixes: []string{"json", "xml", "csv", "html", "txt", "yaml"}},
		Policy: Policy{Mode: "enforce", BundleMinPoll: dur(time.Minute), BundleMaxPoll: dur(2 * time.Minute), BundleMaxAgeAction: "degrade",
			DryRunEvalTimeout: dur(50 * time.Millisecond), BundleMaxBytes: 32 << 20, DecisionCacheSize: 32768},
		Audit: Audit{Destination: "stdout", QueueSize: 4096},
		DecisionLog: DecisionLog{Sink: "off", Overflow: "drop_oldest", SpoolMaxBytes: 1 << 30, FsyncInterval: dur(time.Second),
			BatchMaxRecords: 500, FlushInterval: dur(time.Second), Subject: "svc.decisions", NATSStream: "SVC_DECISIONS",
			NATSDuplicateWindow: dur(time.Hour), KafkaTopic: "svc-decisions", IncludeInput: new(true)},
		Log:           Log{Level: "info"},
		IdentityToken: IdentityToken{TTL: dur(5 * time.Minute)},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if !cfg.DevMode() {
		t.Error("DevMode() = false for the defaults, want true")
	}
	if !cfg.Audit.Enabled() {
		t.Error("Audit.Enabled() = false for the defaults, want true")
	}
}

func TestSetDefaultsKeepsSetValues(t *testing.T) {
	cfg, err := Parse(readFile(t, "testdata/full.toml"), FormatTOML, "full.toml")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := cfg.MarshalTOML()
	cfg.SetDefaults()
	after, _ := cfg.MarshalTOML()
	if diff := cmp.Diff(string(before), string(after)); diff != "" {
		t.Errorf("SetDefaults changed set values (-before +after):\n%s", diff)
	}
}

// TestFullFile checks that every key of full.toml is read, against a golden
// file of the canonical TOML, and that the YAML twin reads the same.
func TestFullFile(t *testing.T) {
	golden := filepath.Join("testdata", "full.golden.toml")
	for _, name := range []string{"full.toml", "full.yaml"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", name)
			cfg, err := Load(path, noEnv)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if cfg.Source != path {
				t.Errorf("Source = %q, want %q", cfg.Source, path)
			}
			if got := cfg.JWT.JWKSMaxRefresh.Duration; got != 150*time.Minute {
				t.Errorf("jwt.jwks_max_refresh = %v, want 2h30m", got)
			}
			if got := cfg.SDK.SAML; got == nil || got.AttributeMapping.Role != "memberOf" {
				t.Errorf("sdk.saml = %+v, want attribute_mapping.role memberOf", got)
			}
			if got := cfg.Sidecar.Routes; len(got) != 2 || got[1].Action != "report:export" {
				t.Errorf("sidecar.routes = %+v", got)
			}
			out, err := cfg.MarshalTOML()
			if err != nil {
				t.Fatalf("MarshalTOML: %v", err)
			}
			if *update && name == "full.toml" {
				if err := os.WriteFile(golden, out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(string(readFile(t, golden)), string(out)); diff != "" {
				t.Errorf("MarshalTOML (-golden +got):\n%s", diff)
			}
		})
	}
}

func TestLoadEnvOverridesFile(t *testing.T) {
	tests := []struct {
		env   string
		value string
		get   func(Config) any
		want  any
	}{
		{"SVC_SIDECAR_ADDR", "0.0.0.0:9000", func(c Config) any { return c.SDK.SidecarAddr }, "0.0.0.0:9000"},
		{"SVC_TENANT_ID", "Initech", func(c Config) any { return c.SDK.TenantID }, "Initech"},
		{"SVC_SERVICE_NAME", "billing", func(c Config) any { return c.SDK.ServiceName }, "billing"},
		{"SVC_FAIL_MODE", "open", func(c Config) any { return c.SDK.FailMode }, "open"},
		{"SVC_JWKS_URL", "http://localhost:8080/jwks", func(c Config) any { return c.SDK.JWKSURL }, "http://localhost:8080/jwks"},
		{"SVC_API_KEYS_FILE", "/etc/svc/api-keys.toml", func(c Config) any { return c.APIKeys.File }, "/etc/svc/api-keys.toml"},
		{"SVC_IDENTITY_TOKEN_SIGNING_KEY_FILE", "/etc/svc/id.pem", func(c Config) any { return c.IdentityToken.SigningKeyFile }, "/etc/svc/id.pem"},
		{"SVC_IDENTITY_TOKEN_TTL", "90s", func(c Config) any { return c.IdentityToken.TTL.Duration }, 90 * time.Second},
		{"SVC_INTROSPECTION_URL", "https://idp.example.com/introspect", func(c Config) any { return c.Introspection.URL }, "https://idp.example.com/introspect"},
		{"SVC_INTROSPECTION_CLIENT_ID", "svc-gateway", func(c Config) any { return c.Introspection.ClientID }, "svc-gateway"},
		{"SVC_INTROSPECTION_CLIENT_SECRET_FILE", "/run/secrets/other", func(c Config) any { return c.Introspection.ClientSecretFile }, "/run/secrets/other"},
		{"SVC_INTROSPECTION_TENANT_CLAIM", "account", func(c Config) any { return c.Introspection.TenantClaim }, "account"},
		{"SVC_INTROSPECTION_CACHE_TTL", "90s", func(c Config) any { return c.Introspection.CacheTTL }, dur(90 * time.Second)},
		{"SVC_INTROSPECTION_NEGATIVE_CACHE_TTL", "7s", func(c Config) any { return c.Introspection.NegativeCacheTTL }, dur(7 * time.Second)},
		{"SVC_POLICY_DIR", "/srv/policies", func(c Config) any { return c.Policy.Dir }, "/srv/policies"},
		{"SVC_BUNDLE_VERIFY_KEY_FILE", "/srv/k.pem", func(c Config) any { return c.Policy.BundleVerifyKeyFile }, "/srv/k.pem"},
		{"SVC_BUNDLE_CACHE_DIR", "/var/lib/svc", func(c Config) any { return c.Policy.BundleCacheDir }, "/var/lib/svc"},
		{"SVC_BUNDLE_URL", "https://cp.example.com/bundles/svc.tar.gz", func(c Config) any { return c.Policy.BundleURL }, "https://cp.example.com/bundles/svc.tar.gz"},
		{"SVC_BUNDLE_TOKEN_FILE", "/run/cp-token", func(c Config) any { return c.Policy.BundleTokenFile }, "/run/cp-token"},
		{"SVC_BUNDLE_MAX_AGE", "168h", func(c Config) any { return c.Policy.BundleMaxAge }, dur(168 * time.Hour)},
		{"SVC_BUNDLE_MAX_AGE_ACTION", "degrade", func(c Config) any { return c.Policy.BundleMaxAgeAction }, "degrade"},
		{"SVC_POLICY_DRY_RUN_EVAL_TIMEOUT", "2s", func(c Config) any { return c.Policy.DryRunEvalTimeout }, dur(2 * time.Second)},
		{"SVC_POLICY_ALLOW_NETWORK_BUILTINS", "true", func(c Config) any { return c.Policy.AllowNetworkBuiltins }, true},
		{"SVC_POLICY_BUNDLE_MAX_BYTES", "16777216", func(c Config) any { return c.Policy.BundleMaxBytes }, int64(16 << 20)},
		{"SVC_POLICY_DECISION_CACHE_SIZE", "100000", func(c Config) any { return c.Policy.DecisionCacheSize }, 100000},
		{"SVC_LOG_LEVEL", "warn", func(c Config) any { return c.Log.Level }, "warn"},
		{"SVC_JWT_ISSUER", "https://other.example.com/", func(c Config) any { return c.JWT.Issuer }, "https://other.example.com/"},
		{"SVC_JWT_AUDIENCES", " a, b ,,c ", func(c Config) any { return c.JWT.Audiences }, []string{"a", "b", "c"}},
		{"SVC_HTTP_ADDR", "[::1]:7701", func(c Config) any { return c.Sidecar.HTTPAddr }, "[::1]:7701"},
		{"SVC_ADMIN_TOKEN_FILE", "/run/token", func(c Config) any { return c.Sidecar.AdminTokenFile }, "/run/token"},
		{"SVC_ADMIN_REQUIRE_TOKEN", "true", func(c Config) any { return c.Sidecar.AdminRequireToken }, true},
		{"SVC_TLS_CERT_FILE", "/run/tls/crt.pem", func(c Config) any { return c.Sidecar.TLSCertFile }, "/run/tls/crt.pem"},
		{"SVC_TLS_KEY_FILE", "/run/tls/key.pem", func(c Config) any { return c.Sidecar.TLSKeyFile }, "/run/tls/key.pem"},
		{"SVC_TLS_CLIENT_CA_FILE", "/run/tls/ca.pem", func(c Config) any { return c.Sidecar.TLSClientCAFile }, "/run/tls/ca.pem"},
		{"SVC_SOCKET_MODE", "0666", func(c Config) any { return c.Sidecar.SocketMode }, "0666"},
		{"SVC_PUBLIC_READ", "true", func(c Config) any { return c.Sidecar.PublicRead }, true},
		{"SVC_AUDIT_DESTINATION", "off", func(c Config) any { return c.Audit.Destination }, "off"},
		{"SVC_RATE_LIMIT_DEFAULT_RPM", "42", func(c Config) any { return c.RateLimit.DefaultRPM }, 42},
		{"SVC_ACCEPTED_TENANTS", "globex, initech", func(c Config) any { return c.SDK.AcceptedTenants }, []string{"globex", "initech"}},
		{"SVC_JWT_ALLOWED_TYP", "at+jwt", func(c Config) any { return c.JWT.AllowedTyp }, []string{"at+jwt"}},
		{"SVC_JWT_CACHE_MAX_AGE", "90s", func(c Config) any { return c.JWT.CacheMaxAge }, dur(90 * time.Second)},
		{"SVC_DEV_ISSUER_DIR", "/tmp/dev-issuer", func(c Config) any { return c.SDK.DevIssuerDir }, "/tmp/dev-issuer"},
		{"SVC_CHECK_PROXY", "nginx", func(c Config) any { return c.Sidecar.CheckProxy }, "nginx"},
		{"SVC_TRUST_FORWARDED_FOR", "true", func(c Config) any { return c.Sidecar.TrustForwardedFor }, true},
		{"SVC_STATE_DIR", "/srv/svc-state", func(c Config) any { return c.Sidecar.StateDir }, "/srv/svc-state"},
		{"SVC_TRUSTED_PROXIES", "127.0.0.1, 10.0.0.0/8,fd00::/8", func(c Config) any { return c.Sidecar.TrustedProxies }, []string{"127.0.0.1", "10.0.0.0/8", "fd00::/8"}},
		{"SVC_ENVOY_ROUTES_CASE_SENSITIVE", "false", func(c Config) any { return c.Envoy.RoutesCaseSensitive }, false},
		{"SVC_ENVOY_FORMAT_SUFFIXES", "json, pdf", func(c Config) any { return c.Envoy.FormatSuffixes }, []string{"json", "pdf"}},
		{"SVC_POLICY_MODE", "dry-run", func(c Config) any { return c.Policy.Mode }, "dry-run"},
		{"SVC_AUDIT_MAX_SIZE_MB", "7", func(c Config) any { return c.Audit.MaxSizeMB }, 7},
		{"SVC_AUDIT_MAX_BACKUPS", "0", func(c Config) any { return c.Audit.MaxBackups }, 0},
		{"SVC_DECISION_LOG_SINK", "off", func(c Config) any { return c.DecisionLog.Sink }, "off"},
		{"SVC_DECISION_LOG_URL", "nats://nats-2.internal:4222", func(c Config) any { return c.DecisionLog.URL }, "nats://nats-2.internal:4222"},
		{"SVC_DECISION_LOG_SPOOL_DIR", "/var/lib/svc/spool", func(c Config) any { return c.DecisionLog.SpoolDir }, "/var/lib/svc/spool"},
		{"SVC_DECISION_LOG_SPOOL_MAX_BYTES", "2147483648", func(c Config) any { return c.DecisionLog.SpoolMaxBytes }, int64(2147483648)},
		{"SVC_DECISION_LOG_OVERFLOW", "drop_oldest", func(c Config) any { return c.DecisionLog.Overflow }, "drop_oldest"},
		{"SVC_DECISION_LOG_FSYNC_INTERVAL", "250ms", func(c Config) any { return c.DecisionLog.FsyncInterval }, dur(250 * time.Millisecond)},
		{"SVC_DECISION_LOG_BATCH_MAX_RECORDS", "1000", func(c Config) any { return c.DecisionLog.BatchMaxRecords }, 1000},
		{"SVC_DECISION_LOG_FLUSH_INTERVAL", "3s", func(c Config) any { return c.DecisionLog.FlushInterval }, dur(3 * time.Second)},
		{"SVC_DECISION_LOG_SUBJECT", "globex.decisions", func(c Config) any { return c.DecisionLog.Subject }, "globex.decisions"},
		{"SVC_DECISION_LOG_NATS_STREAM", "GLOBEX_DECISIONS", func(c Config) any { return c.DecisionLog.NATSStream }, "GLOBEX_DECISIONS"},
		{"SVC_DECISION_LOG_NATS_DUPLICATE_WINDOW", "6h", func(c Config) any { return c.DecisionLog.NATSDuplicateWindow }, dur(6 * time.Hour)},
		{"SVC_DECISION_LOG_KAFKA_TOPIC", "globex-decisions", func(c Config) any { return c.DecisionLog.KafkaTopic }, "globex-decisions"},
		{"SVC_DECISION_LOG_KAFKA_SASL_MECHANISM", "PLAIN", func(c Config) any { return c.DecisionLog.KafkaSASLMechanism }, "PLAIN"},
		{"SVC_DECISION_LOG_KAFKA_SASL_USERNAME", "globex", func(c Config) any { return c.DecisionLog.KafkaSASLUsername }, "globex"},
		{"SVC_DECISION_LOG_KAFKA_SASL_PASSWORD_FILE", "/run/secrets/kafka", func(c Config) any { return c.DecisionLog.KafkaSASLPasswordFile }, "/run/secrets/kafka"},
		{"SVC_DECISION_LOG_TLS_CA_FILE", "/etc/ca.pem", func(c Config) any { return c.DecisionLog.TLSCAFile }, "/etc/ca.pem"},
		{"SVC_DECISION_LOG_HTTP_TOKEN_FILE", "/run/secrets/globex-logs", func(c Config) any { return c.DecisionLog.HTTPTokenFile }, "/run/secrets/globex-logs"},
		{"SVC_DECISION_LOG_INCLUDE_INPUT", "true", func(c Config) any { return c.DecisionLog.IncludesInput() }, true},
		{"SVC_DECISION_LOG_MASK", "/input/user/email, /resource/id", func(c Config) any { return c.DecisionLog.Mask },
			[]string{"/input/user/email", "/resource/id"}},
		{"SVC_REDIS_ADDR", "redis.internal:6380", func(c Config) any { return c.RateLimit.RedisAddr }, "redis.internal:6380"},
		{"SVC_REDIS_TIMEOUT", "2s", func(c Config) any { return c.RateLimit.RedisTimeout }, dur(2 * time.Second)},
		{"SVC_RATE_LIMIT_REDIS_FALLBACK", "allow", func(c Config) any { return c.RateLimit.RedisFallback }, "allow"},
		{"SVC_RATE_LIMIT_REPLICAS", "4", func(c Config) any { return c.RateLimit.Replicas }, 4},
		{"SVC_REDIS_TLS", "false", func(c Config) any { return c.RateLimit.RedisTLS }, false},
		{"SVC_REDIS_TLS_CA_FILE", "/etc/redis-ca.pem", func(c Config) any { return c.RateLimit.RedisTLSCAFile }, "/etc/redis-ca.pem"},
		{"SVC_REDIS_USERNAME", "svc", func(c Config) any { return c.RateLimit.RedisUsername }, "svc"},
		{"SVC_REDIS_PASSWORD_FILE", "/run/secrets/redis", func(c Config) any { return c.RateLimit.RedisPasswordFile }, "/run/secrets/redis"},
		{"SVC_SAML_ADDR", "0.0.0.0:7701", func(c Config) any { return c.Sidecar.SAMLAddr }, "0.0.0.0:7701"},
		{"SVC_SAML_ENTITY_ID", "https://e.example.com/sp", func(c Config) any { return c.SDK.SAML.EntityID }, "https://e.example.com/sp"},
		{"SVC_SAML_ACS_URL", "https://e.example.com/acs", func(c Config) any { return c.SDK.SAML.ACSURL }, "https://e.example.com/acs"},
		{"SVC_SAML_IDP_METADATA_URL", "https://idp2.example.com/md", func(c Config) any { return c.SDK.SAML.IDPMetadataURL }, "https://idp2.example.com/md"},
		{"SVC_SAML_CLOCK_SKEW_SECONDS", "5", func(c Config) any { return c.SDK.SAML.ClockSkewSeconds }, 5},
		{"SVC_SAML_ATTRIBUTE_EMAIL", "email", func(c Config) any { return c.SDK.SAML.AttributeMapping.Email }, "email"},
		{"SVC_SAML_ATTRIBUTE_ROLE", "groups", func(c Config) any { return c.SDK.SAML.AttributeMapping.Role }, "groups"},
		{"SVC_SAML_ATTRIBUTE_TENANT", "tenant", func(c Config) any { return c.SDK.SAML.AttributeMapping.Tenant }, "tenant"},
		{"SVC_SAML_SP_PRIVATE_KEY_FILE", "/run/k.pem", func(c Config) any { return c.SDK.SAML.SPPrivateKeyFile }, "/run/k.pem"},
		{"SVC_SAML_SP_CERTIFICATE_FILE", "/run/c.pem", func(c Config) any { return c.SDK.SAML.SPCertificateFile }, "/run/c.pem"},
		{"SVC_SAML_IDP_METADATA_SIGNING_CERTIFICATE_FILE", "/run/md.pem", func(c Config) any { return c.SDK.SAML.IDPMetadataSigningCertificateFile }, "/run/md.pem"},
		{"SVC_SAML_ALLOW_IDP_INITIATED", "false", func(c Config) any { return c.SDK.SAML.AllowIDPInitiated }, false},
		{"SVC_SAML_TOKEN_TTL", "1h", func(c Config) any { return c.SDK.SAML.TokenTTL.Duration }, time.Hour},
		{"SVC_SAML_ACS_MAX_CONCURRENT", "16", func(c Config) any { return c.SDK.SAML.ACSMaxConcurrent }, 16},
		{"SVC_SAML_ACS_TIMEOUT", "2s", func(c Config) any { return c.SDK.SAML.ACSTimeout.Duration }, 2 * time.Second},
		{"SVC_SAML_TOKEN_SIGNING_KEY_FILE", "/run/t.pem", func(c Config) any { return c.SDK.SAML.TokenSigningKeyFile }, "/run/t.pem"},
		{"SVC_SAML_COOKIE_NAME", "sess", func(c Config) any { return c.SDK.SAML.CookieName }, "sess"},
		{"SVC_SAML_PATH_PREFIX", "/saml", func(c Config) any { return c.SDK.SAML.PathPrefix }, "/saml"},
		{"SVC_SAML_BROWSER_REDIRECT", "true", func(c Config) any { return c.SDK.SAML.RedirectsBrowsers() }, true},
		{"SVC_SAML_DEFAULT_RETURN_TO", "/home?tab=1", func(c Config) any { return c.SDK.SAML.DefaultReturnTo }, "/home?tab=1"},
		{"SVC_SIGNIN_ADDR", "0.0.0.0:7702", func(c Config) any { return c.Sidecar.SigninAddr + " " + c.Sidecar.SAMLAddr }, "0.0.0.0:7702 0.0.0.0:7702"},
		{"SVC_SESSION_COOKIE_NAME", "sess", func(c Config) any { return c.SDK.Session.CookieName + " " + c.SDK.SAML.CookieName }, "sess sess"},
		{"SVC_SESSION_TOKEN_TTL", "1h", func(c Config) any { return c.SDK.Session.TokenTTL.Duration }, time.Hour},
		{"SVC_SESSION_REFRESH_BEFORE", "3m", func(c Config) any { return c.SDK.Session.RefreshBefore.Duration }, 3 * time.Minute},
		{"SVC_SESSION_TOKEN_SIGNING_KEY_FILE", "/run/s.pem", func(c Config) any { return c.SDK.Session.TokenSigningKeyFile }, "/run/s.pem"},
		{"SVC_SESSION_DEFAULT_RETURN_TO", "/start", func(c Config) any { return c.SDK.Session.DefaultReturnTo }, "/start"},
		{"SVC_SESSION_BROWSER_REDIRECT", "true", func(c Config) any { return c.SDK.Session.RedirectsBrowsers() }, true},
		{"SVC_SESSION_ISSUER", "https://other.example.com", func(c Config) any { return c.SDK.Session.Issuer }, "https://other.example.com"},
		{"SVC_OIDC_ISSUER_URL", "https://op2.example.com", func(c Config) any { return c.SDK.OIDC.IssuerURL }, "https://op2.example.com"},
		{"SVC_OIDC_CLIENT_ID", "orders-2", func(c Config) any { return c.SDK.OIDC.ClientID }, "orders-2"},
		{"SVC_OIDC_CLIENT_SECRET_FILE", "/run/oidc-secret", func(c Config) any { return c.SDK.OIDC.ClientSecretFile }, "/run/oidc-secret"},
		{"SVC_OIDC_REDIRECT_URL", "https://orders2.example.com/sso/oidc/callback", func(c Config) any { return c.SDK.OIDC.RedirectURL },
			"https://orders2.example.com/sso/oidc/callback"},
		{"SVC_OIDC_SCOPES", "openid, offline_access", func(c Config) any { return c.SDK.OIDC.Scopes }, []string{"openid", "offline_access"}},
		{"SVC_OIDC_CLAIM_TENANT", "tid", func(c Config) any { return c.SDK.OIDC.ClaimMapping.Tenant }, "tid"},
		{"SVC_OIDC_CLAIM_ROLES", "memberOf", func(c Config) any { return c.SDK.OIDC.ClaimMapping.Roles }, "memberOf"},
		{"SVC_OIDC_CLAIM_EMAIL", "upn", func(c Config) any { return c.SDK.OIDC.ClaimMapping.Email }, "upn"},
		{"SVC_OIDC_PATH_PREFIX", "/login/oidc", func(c Config) any { return c.SDK.OIDC.PathPrefix }, "/login/oidc"},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.env] = true
		t.Run(tt.env, func(t *testing.T) {
			cfg, err := Load("testdata/full.toml", envOf(map[string]string{tt.env: tt.value}))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if diff := cmp.Diff(tt.want, tt.get(cfg)); diff != "" {
				t.Errorf("value (-want +got):\n%s", diff)
			}
			key := envKey(tt.env)
			if got := cfg.Overrides; len(got) != 1 || got[key] != tt.env {
				t.Errorf("Overrides = %v, want only %s=%s", got, key, tt.env)
			}
			file, err := Load("testdata/full.toml", noEnv)
			if err != nil {
				t.Fatal(err)
			}
			if cmp.Equal(tt.get(file), tt.get(cfg)) {
				t.Errorf("the file already holds %v: the case proves nothing", tt.want)
			}
		})
	}
	// full.toml sets sdk.jwks_url, which jwt.issuer_url replaces:
	// oidc.toml sets the issuer URL instead.
	t.Run("SVC_JWT_ISSUER_URL", func(t *testing.T) {
		covered["SVC_JWT_ISSUER_URL"] = true
		cfg, err := Load("testdata/oidc.toml", envOf(map[string]string{"SVC_JWT_ISSUER_URL": "https://other.example.com"}))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if cfg.JWT.IssuerURL != "https://other.example.com" || cfg.Overrides["jwt.issuer_url"] != "SVC_JWT_ISSUER_URL" {
			t.Errorf("jwt.issuer_url = %q, overrides %v; want the variable's", cfg.JWT.IssuerURL, cfg.Overrides)
		}
		file, err := Load("testdata/oidc.toml", noEnv)
		if err != nil || file.JWT.IssuerURL != "https://idp.example.com" {
			t.Errorf("oidc.toml: jwt.issuer_url = %q, %v", file.JWT.IssuerURL, err)
		}
	})
	// Covered by TestSAMLFromEnvOnly: full.toml's own values conflict with them.
	for _, n := range []string{"SVC_SAML_IDP_METADATA_FILE", "SVC_SAML_SP_PRIVATE_KEY_PEM", "SVC_SAML_SP_CERTIFICATE_PEM"} {
		covered[n] = true
	}
	for _, ev := range EnvVars() {
		if !covered[ev.Name] {
			t.Errorf("%s has no override case", ev.Name)
		}
	}
}

func TestLoadEmptyEnvKeepsFile(t *testing.T) {
	cfg, err := Load("testdata/full.toml", envOf(map[string]string{"SVC_TENANT_ID": "", "SVC_LOG_LEVEL": ""}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SDK.TenantID != "AcMe" || cfg.Log.Level != "debug" || len(cfg.Overrides) != 0 {
		t.Errorf("empty variables changed the config: tenant %q, level %q, overrides %v",
			cfg.SDK.TenantID, cfg.Log.Level, cfg.Overrides)
	}
}

// TestLoadErrors checks that broken files fail with errors naming the
// file, the line when known, and the full key.
func TestLoadErrors(t *testing.T) {
	tests := []struct {
		file string
		env  map[string]string
		want []string
		is   error
	}{
		{file: "unknown_key.toml", is: ErrUnknownKey, want: []string{
			"testdata/unknown_key.toml:3:1: sdk.jwks_ur: unknown key (did you mean sdk.jwks_url?)",
			"testdata/unknown_key.toml:7:1: tenants.AcMe.tier: unknown key"}},
		{file: "unknown_key.yaml", is: ErrUnknownKey, want: []string{
			"testdata/unknown_key.yaml:3:3: sdk.jwks_ur: unknown key (did you mean sdk.jwks_url?)",
			"testdata/unknown_key.yaml:7:5: tenants.AcMe.tier: unknown key"}},
		{file: "syntax.toml", want: []string{"testdata/syntax.toml:1:5: expected ']' to close table name"}},
		{file: "syntax.yaml", want: []string{"testdata/syntax.yaml:3: mapping values are not allowed in this context"}},
		{file: "closed_no_jwks.toml", want: []string{
			"testdata/closed_no_jwks.toml:3: sdk.fail_mode: fail_mode=closed requires an identity source (sdk.jwks_url or sdk.saml or jwt.issuer_url or jwt.issuers or api_keys.file or client_certs.trust_domains or introspection.url or sdk.oidc): without one every bearer is accepted as anonymous (development mode)"}},
		{file: "bare_number_duration.toml", want: []string{
			`testdata/bare_number_duration.toml: jwt.clock_skew: must be a duration string such as "30s", got a TOML integer`}},
		{file: "negative_duration.yaml", want: []string{
			`testdata/negative_duration.yaml:3:15: jwt.clock_skew: must not be negative, got "-5s"`}},
		{file: "wrong_type.toml", want: []string{
			"testdata/wrong_type.toml:2:14: jwt.cache_size: must be an integer, got a TOML string"}},
		{file: "wrong_type.yaml", want: []string{
			"testdata/wrong_type.yaml:3: jwt.cache_size: must be an integer, got a string"}},
		{file: "public_http_jwks.toml", want: []string{
			`testdata/public_http_jwks.toml:3: sdk.jwks_url: must use https (http only on a loopback host), got "http://idp.example.com/jwks"`}},
		{file: "invalid_values.toml", want: []string{
			`testdata/invalid_values.toml:3: sdk.sidecar_addr: must be host:port, got "localhost"`,
			`testdata/invalid_values.toml:4: sdk.fail_mode: must be "open" or "closed", got "maybe"`,
			`testdata/invalid_values.toml:8: jwt.jwks_min_refresh: must not exceed jwt.jwks_max_refresh (2h0m0s > 1h0m0s)`,
			`testdata/invalid_values.toml:7: jwt.cache_size: must be positive, got -1`,
			`testdata/invalid_values.toml:12: rate_limit.default_rpm: must not be negative, got -1`,
			`testdata/invalid_values.toml:15: rate_limit.per_tenant."team a": must not be negative, got -5`,
			`testdata/invalid_values.toml:18: sidecar.http_addr: port must be a number from 0 to 65535, got "99999"`,
			`testdata/invalid_values.toml:21: sidecar.routes[0].path: must start with "/", got "api/{resource"`,
			`testdata/invalid_values.toml:22: sidecar.routes[0].methods[0]: must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, CONNECT, TRACE, got "get"`,
			`testdata/invalid_values.toml:25: log.level: must be one of trace, debug, info, warn, error, got "verbose"`}},
		{file: "full.toml", env: map[string]string{"SVC_JWKS_URL": "http://idp.example.com/jwks"}, want: []string{
			`SVC_JWKS_URL: must use https (http only on a loopback host), got "http://idp.example.com/jwks"`}},
		{file: "closed_no_jwks.toml", env: map[string]string{"SVC_FAIL_MODE": "maybe", "SVC_RATE_LIMIT_DEFAULT_RPM": "lots"}, want: []string{
			`SVC_FAIL_MODE: must be "open" or "closed", got "maybe"`,
			`SVC_RATE_LIMIT_DEFAULT_RPM: must be a non-negative integer, got "lots"`}},
	}
	for _, tt := range tests {
		name := tt.file
		if tt.env != nil {
			name += "+env"
		}
		t.Run(name, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", tt.file), envOf(tt.env))
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			var got []string
			for _, e := range Errors(err) {
				got = append(got, e.Error())
				if e.Key == "" && e.Line == 0 {
					t.Errorf("%q names neither a key nor a line", e.Error())
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Error("errors.Is(err, ErrInvalid) = false")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(err, %v) = false", tt.is)
			}
		})
	}
}

func TestLoopbackHTTPJWKS(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:8080/jwks", true},
		{"http://127.9.9.9/jwks", true},
		{"http://localhost:8080/jwks", true},
		{"http://LOCALHOST/jwks", true},
		{"http://[::1]:8080/jwks", true},
		{"https://idp.example.com/jwks", true},
		{"http://idp.example.com/jwks", false},
		{"http://10.0.0.1/jwks", false},
		{"http://localhost.example.com/jwks", false},
		{"http://[::2]/jwks", false},
		{"ftp://127.0.0.1/jwks", false},
		{"https://user:secret@idp.example.com/jwks", false},
		{"https:///jwks", false},
		{"idp.example.com/jwks", false},
		{"https://idp.example.com:bad/jwks", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			_, err := Load("", envOf(map[string]string{"SVC_JWKS_URL": tt.url}))
			if (err == nil) != tt.ok {
				t.Fatalf("Load with jwks_url %q: err = %v, want ok=%v", tt.url, err, tt.ok)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q leaks the URL's password", err)
			}
			if err == nil {
				return
			}
			if got := Errors(err); len(got) != 1 || got[0].Key != "sdk.jwks_url" || got[0].Source != "SVC_JWKS_URL" {
				t.Errorf("errors = %v, want one for sdk.jwks_url from SVC_JWKS_URL", err)
			}
		})
	}
	if _, err := Load("testdata/loopback_http_jwks.toml", noEnv); err != nil {
		t.Errorf("loopback_http_jwks.toml: %v", err)
	}
}

func TestCasePreserved(t *testing.T) {
	yamlDoc := "tenants:\n  AcMe: {plan: pro}\n  acme: {plan: free}\nrate_limit:\n  per_tenant:\n    AcMe: 5\n"
	for _, tt := range []struct {
		name, format string
		data         []byte
	}{
		{"toml", FormatTOML, readFile(t, "testdata/case.toml")},
		{"yaml", FormatYAML, []byte(yamlDoc)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(tt.data, tt.format, "case")
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.TenantPlan("AcMe"); got != "pro" {
				t.Errorf(`TenantPlan("AcMe") = %q, want "pro"`, got)
			}
			if got := cfg.TenantPlan("acme"); got != "free" {
				t.Errorf(`TenantPlan("acme") = %q, want "free"`, got)
			}
			if got := cfg.TenantPlan("ACME"); got != "" {
				t.Errorf(`TenantPlan("ACME") = %q, want ""`, got)
			}
			for id, want := range map[string]int{"AcMe": 5, "acme": 1000, "ACME": 1000} {
				if got := cfg.RateLimitFor(id); got != want {
					t.Errorf("RateLimitFor(%q) = %d, want %d", id, got, want)
				}
			}
		})
	}
}

func TestFormatOf(t *testing.T) {
	tests := []struct{ path, want string }{
		{"svc.toml", FormatTOML}, {"/etc/svc/SVC.TOML", FormatTOML},
		{"svc.yaml", FormatYAML}, {"svc.yml", FormatYAML},
		{"svc.json", ""}, {"svc", ""}, {"svc.toml.bak", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := FormatOf(tt.path)
			if got != tt.want || (err != nil) != (tt.want == "") {
				t.Errorf("FormatOf(%q) = %q, %v; want %q", tt.path, got, err, tt.want)
			}
		})
	}
	if _, err := Load("testdata/svc.json", noEnv); err == nil || !strings.HasPrefix(err.Error(), "testdata/svc.json: ") {
		t.Errorf("Load of a .json file: err = %v, want one naming the file", err)
	}
	if _, err := Parse(nil, "ini", "x.ini"); err == nil {
		t.Error(`Parse with format "ini" succeeded`)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.toml")
	_, err := Load(path, noEnv)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
	if want := path + ": cannot read: no such file or directory"; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
}

func TestParseEmptyAndTrivial(t *testing.T) {
	tests := []struct {
		name, format, data string
		ok                 bool
	}{
		{"empty toml", FormatTOML, "", true},
		{"empty yaml", FormatYAML, "", true},
		{"yaml null document", FormatYAML, "~\n", true},
		{"yaml comment only", FormatYAML, "# nothing\n", true},
		{"yaml list at top", FormatYAML, "- a\n", false},
		{"yaml two documents", FormatYAML, "log: {level: info}\n---\nlog: {level: warn}\n", false},
		{"yaml merge keys", FormatYAML, "tenants: {a: &t {plan: pro}, b: {<<: *t}}\n", true},
		{"yaml unknown key beside merge", FormatYAML, "tenants: {a: &t {plan: a}, b: {<<: [*t], tier: 1}}\n", false},
		{"yaml merge of another table", FormatYAML, "sdk: &s {tenant_id: a}\nlog: {<<: *s}\n", false},
		{"toml table where a value belongs", FormatTOML, "[log.level]\nx = 1\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.data), tt.format, "t")
			if (err == nil) != tt.ok {
				t.Errorf("Parse: err = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("err %v is not an *Error", err)
			}
		})
	}
}

func TestAccessors(t *testing.T) {
	base := Config{RateLimit: RateLimit{DefaultRPM: 70, PerTenant: map[string]int{"a": 7, "z": 0}},
		Tenants: map[string]Tenant{"a": {Plan: "gold"}}}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"rate: per tenant", base.RateLimitFor("a"), 7},
		{"rate: per tenant zero", base.RateLimitFor("z"), 0},
		{"rate: default", base.RateLimitFor("b"), 70},
		{"rate: default unset", Config{}.RateLimitFor("b"), DefaultRPM},
		{"plan: set", base.TenantPlan("a"), "gold"},
		{"plan: unknown tenant", base.TenantPlan("b"), ""},
		{"audit: off", Audit{Destination: AuditOff}.Enabled(), false},
		{"audit: file", Audit{Destination: "/var/log/a"}.Enabled(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

func TestSAMLFromEnvOnly(t *testing.T) {
	const keyPEM = "-----BEGIN PRIVATE KEY-----\nsecret\n-----END PRIVATE KEY-----\n"
	cfg, err := Load("", envOf(map[string]string{
		"SVC_SAML_ENTITY_ID":          "https://app.example.com/sp",
		"SVC_SAML_ACS_URL":            "https://app.example.com/auth/saml/acs",
		"SVC_SAML_IDP_METADATA_FILE":  "/etc/svc/idp.xml",
		"SVC_SAML_SP_PRIVATE_KEY_PEM": keyPEM,
		"SVC_SAML_SP_CERTIFICATE_PEM": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
	}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	s := cfg.SDK.SAML
	if s == nil || s.IDPMetadataFile != "/etc/svc/idp.xml" || s.SPPrivateKeyPEM != keyPEM || s.SPCertificatePEM == "" {
		t.Fatalf("sdk.saml = %+v", s)
	}
	if s.TokenTTL.Duration != 15*time.Minute || s.CookieName != "svc_session" || s.PathPrefix != "/auth/saml" || s.ClockSkewSeconds != 30 {
		t.Errorf("defaults not applied: %+v", s)
	}
	if cfg.DevMode() {
		t.Error("DevMode() = true with [sdk.saml], want false")
	}
	out, err := cfg.MarshalTOML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "PRIVATE KEY") {
		t.Errorf("MarshalTOML wrote the SP private key:\n%s", out)
	}
	_, err = Load("", envOf(map[string]string{
		"SVC_SAML_ENTITY_ID": "https://app.example.com/sp", "SVC_SAML_ACS_URL": "https://app.example.com/acs",
		"SVC_SAML_IDP_METADATA_FILE": "/x.xml", "SVC_SAML_SP_PRIVATE_KEY_PEM": keyPEM,
	}))
	if err == nil || !strings.Contains(err.Error(), "sdk.saml.sp_certificate_file") {
		t.Errorf("key without certificate: err = %v", err)
	}
}

// TestIssuersFile loads several identity providers from [[jwt.issuers]]:
// they are the identity source, and each keeps its own tenant setting.
func TestIssuersFile(t *testing.T) {
	cfg, err := Load("testdata/issuers.toml", noEnv)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := []JWTIssuer{
		{IssuerURL: "https://login.example.com", TenantClaim: "org"},
		{Issuer: "https://partner.example.net/", JWKSURL: "https://partner.example.net/keys", Audiences: []string{"partner-api"}, Tenant: "partner"},
	}
	if diff := cmp.Diff(want, cfg.JWT.Issuers); diff != "" {
		t.Errorf("jwt.issuers (-want +got):\n%s", diff)
	}
	if cfg.DevMode() || !slices.Equal(cfg.IdentitySources(), []string{"jwt.issuers"}) {
		t.Errorf("DevMode %v, sources %v; want jwt.issuers alone", cfg.DevMode(), cfg.IdentitySources())
	}
	if got := cfg.JWT.Issuers[0].Iss(); got != "https://login.example.com" {
		t.Errorf("Iss() = %q, want the issuer URL", got)
	}
}
