package config

import (
	"runtime"
	"slices"
	"time"

	"github.com/svc-dev/svc/engine/reqpath"
)

// Defaults applied by SetDefaults.
const (
	DefaultSidecarAddr      = "[::1]:50051"
	DefaultServiceName      = "svc-sidecar"
	DefaultFailMode         = FailOpen
	DefaultJWTClockSkew     = 30 * time.Second
	DefaultJWTCacheSize     = 20000
	DefaultJWTCacheMaxAge   = 10 * time.Minute
	DefaultJWKSFetchTimeout = 5 * time.Second
	DefaultJWKSMinRefresh   = time.Minute
	DefaultJWKSMaxRefresh   = time.Hour
	DefaultRPM              = 1000
	DefaultRedisTimeout     = 50 * time.Millisecond
	DefaultRedisFallback    = "local"
	DefaultHTTPAddr         = "127.0.0.1:7700"
	DefaultDrainTimeout     = 30 * time.Second
	DefaultSocketMode       = "0660"
	DefaultBundleMinPoll    = 60 * time.Second
	DefaultBundleMaxPoll    = 120 * time.Second
	// DefaultDryRunEvalTimeout bounds one evaluation of a dry-run
	// candidate; MaxDryRunEvalTimeout bounds the setting.
	DefaultDryRunEvalTimeout = 50 * time.Millisecond
	MaxDryRunEvalTimeout     = 10 * time.Second
	// DefaultBundleMaxBytes bounds a bundle archive and each of its
	// files; MinBundleMaxBytes and MaxBundleMaxBytes bound the setting.
	DefaultBundleMaxBytes   = 32 << 20
	MinBundleMaxBytes       = 1 << 20
	MaxBundleMaxBytes       = 1 << 30
	DefaultCheckProxy       = CheckProxyAuto
	DefaultAuditDestination = AuditStdout
	DefaultAuditQueueSize   = 4096
	DefaultLogLevel         = "info"

	// DefaultDecisionCacheSize bounds each policy set's decision cache;
	// MinDecisionCacheSize and MaxDecisionCacheSize bound the setting.
	DefaultDecisionCacheSize = 32768
	MinDecisionCacheSize     = 16
	MaxDecisionCacheSize     = 1 << 22

	// Default SAML attribute names: the standard e-mail-address claim URI,
	// "role" and "tenant_id".
	DefaultSAMLEmailAttribute  = "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress"
	DefaultSAMLRoleAttribute   = "role"
	DefaultSAMLTenantAttribute = "tenant_id"

	DefaultSAMLAddr       = "127.0.0.1:7701"
	DefaultSAMLClockSkew  = 30
	DefaultSAMLTokenTTL   = 15 * time.Minute
	MaxSAMLTokenTTL       = 24 * time.Hour
	DefaultSAMLCookieName = "svc_session"
	DefaultSAMLPathPrefix = "/auth/saml"
	// DefaultSAMLReturnTo is sdk.saml.default_return_to's default.
	DefaultSAMLReturnTo   = "/"
	DefaultSAMLACSTimeout = 5 * time.Second
)

// DefaultSAMLACSMaxConcurrent is the default sdk.saml.acs_max_concurrent:
// half the CPUs the process may use, at least one. A real response
// validates in about 0.5 ms, so one slot serves hundreds of sign-ons a
// second, and a flood can take no more than half the CPU from the
// checks (BenchmarkCheckUnderACSFlood measured Check p99 twice as high
// with a slot per CPU as with half as many).
func DefaultSAMLACSMaxConcurrent() int {
	return max(1, runtime.GOMAXPROCS(0)/2)
}

// Defaults of [introspection], applied when introspection.url is set.
const (
	DefaultIntrospectionTenantClaim      = "tenant_id"
	DefaultIntrospectionCacheTTL         = 5 * time.Minute
	DefaultIntrospectionNegativeCacheTTL = 10 * time.Second
)

// DevTenant is the deployment's tenant in development mode when
// sdk.tenant_id is unset, and the tenant `core dev token` signs for by
// default, so that its tokens meet the default policy's tenant rule.
const DevTenant = "dev"

// SetDefaults fills every field left at its zero value with its default.
// A zero value in the file therefore means "the default": a zero duration,
// cache size, budget or queue size is never used as such.
func (c *Config) SetDefaults() {
	setString(&c.SDK.SidecarAddr, DefaultSidecarAddr)
	setString(&c.SDK.ServiceName, DefaultServiceName)
	setString(&c.SDK.FailMode, DefaultFailMode)
	if c.DevMode() && c.SDK.TenantID == "" && len(c.SDK.AcceptedTenants) == 0 {
		c.SDK.TenantID = DevTenant
	}
	c.setSignInDefaults()
	if s := c.SDK.SAML; s != nil {
		setString(&s.AttributeMapping.Email, DefaultSAMLEmailAttribute)
		setString(&s.AttributeMapping.Role, DefaultSAMLRoleAttribute)
		setString(&s.AttributeMapping.Tenant, DefaultSAMLTenantAttribute)
		if s.ClockSkewSeconds == 0 {
			s.ClockSkewSeconds = DefaultSAMLClockSkew
		}
		setDuration(&s.TokenTTL, DefaultSAMLTokenTTL)
		setString(&s.CookieName, DefaultSAMLCookieName)
		setString(&s.PathPrefix, DefaultSAMLPathPrefix)
		setString(&s.DefaultReturnTo, DefaultSAMLReturnTo)
		if s.BrowserRedirect == nil {
			on := true
			s.BrowserRedirect = &on
		}
		if s.ACSMaxConcurrent == 0 {
			s.ACSMaxConcurrent = DefaultSAMLACSMaxConcurrent()
		}
		setDuration(&s.ACSTimeout, DefaultSAMLACSTimeout)
	}

	if c.Envoy.FormatSuffixes == nil {
		// Only nil: an empty list is how a file says "cut none".
		c.Envoy.FormatSuffixes = slices.Clone(reqpath.DefaultFormats)
	}

	setDuration(&c.Policy.BundleMinPoll, DefaultBundleMinPoll)
	setDuration(&c.Policy.BundleMaxPoll, DefaultBundleMaxPoll)
	setDuration(&c.Policy.DryRunEvalTimeout, DefaultDryRunEvalTimeout)
	if c.Policy.BundleMaxBytes == 0 {
		c.Policy.BundleMaxBytes = DefaultBundleMaxBytes
	}
	if c.Policy.DecisionCacheSize == 0 {
		c.Policy.DecisionCacheSize = DefaultDecisionCacheSize
	}
	setString(&c.Policy.BundleMaxAgeAction, BundleMaxAgeDegrade)

	setDuration(&c.JWT.ClockSkew, DefaultJWTClockSkew)
	if c.JWT.CacheSize == 0 {
		c.JWT.CacheSize = DefaultJWTCacheSize
	}
	setDuration(&c.JWT.CacheMaxAge, DefaultJWTCacheMaxAge)
	setDuration(&c.JWT.JWKSFetchTimeout, DefaultJWKSFetchTimeout)
	setDuration(&c.JWT.JWKSMinRefresh, DefaultJWKSMinRefresh)
	setDuration(&c.JWT.JWKSMaxRefresh, DefaultJWKSMaxRefresh)

	if c.Introspection.URL != "" {
		setString(&c.Introspection.TenantClaim, DefaultIntrospectionTenantClaim)
		setDuration(&c.Introspection.CacheTTL, DefaultIntrospectionCacheTTL)
		setDuration(&c.Introspection.NegativeCacheTTL, DefaultIntrospectionNegativeCacheTTL)
	}

	if c.RateLimit.DefaultRPM == 0 {
		c.RateLimit.DefaultRPM = DefaultRPM
	}
	setDuration(&c.RateLimit.RedisTimeout, DefaultRedisTimeout)
	c.IdentityToken.setDefaults()
	if c.RateLimit.RedisFallback == "" {
		c.RateLimit.RedisFallback = DefaultRedisFallback
	}
	if c.RateLimit.Replicas == 0 {
		c.RateLimit.Replicas = 1
	}

	setString(&c.Sidecar.HTTPAddr, DefaultHTTPAddr)
	setDuration(&c.Sidecar.DrainTimeout, DefaultDrainTimeout)
	setString(&c.Sidecar.SocketMode, DefaultSocketMode)
	setString(&c.Sidecar.CheckProxy, DefaultCheckProxy)
	setString(&c.Sidecar.SAMLAddr, DefaultSAMLAddr)

	setString(&c.Policy.Mode, PolicyModeEnforce)
	setString(&c.Audit.Destination, DefaultAuditDestination)
	if c.Audit.QueueSize == 0 {
		c.Audit.QueueSize = DefaultAuditQueueSize
	}

	c.DecisionLog.setDefaults()
	setString(&c.Log.Level, DefaultLogLevel)
}

func setString(p *string, def string) {
	if *p == "" {
		*p = def
	}
}

func setDuration(p *Duration, def time.Duration) {
	if p.Duration == 0 {
		p.Duration = def
	}
}
