package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/engine/clientcert"
	"github.com/svc-dev/svc/engine/loopback"
	"github.com/svc-dev/svc/wire"
)

// Log levels accepted in log.level.
var logLevels = []string{"trace", "debug", "info", "warn", "error"}

// HTTP methods accepted in route method lists. Methods are case-sensitive,
// so "get" is refused rather than silently never matching.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"}

// Validate reports every setting that cannot work, as one *Error or a list
// joined with errors.Join (see Errors). Each error names the key and its
// source: the SVC_* variable that set it, or else c.Source. Validate
// expects SetDefaults to have run; empty required fields are errors.
func (c Config) Validate() error {
	v := &validator{c: &c}
	v.text(reflect.ValueOf(c), nil)
	v.sdk()
	v.jwt()
	v.tenants()
	v.rateLimit()
	v.clientCerts()
	v.introspection()
	v.sidecar()
	v.signIn()
	v.policy()
	v.identityToken()
	if msg := checkAuditDestination(c.Audit.Destination); msg != "" {
		v.fail("audit.destination", "%s", msg)
	}
	if c.Audit.QueueSize <= 0 {
		v.fail("audit.queue_size", "must be positive, got %d", c.Audit.QueueSize)
	}
	if c.Audit.MaxSizeMB < 0 {
		v.fail("audit.max_size_mb", "must not be negative, got %d", c.Audit.MaxSizeMB)
	}
	if c.Audit.MaxBackups < 0 {
		v.fail("audit.max_backups", "must not be negative, got %d", c.Audit.MaxBackups)
	}
	v.decisionLog()
	v.listFilter()
	if msg := checkPolicyMode(c.Policy.Mode); msg != "" {
		v.fail("policy.mode", "%s", msg)
	}
	if msg := checkLogLevel(c.Log.Level); msg != "" {
		v.fail("log.level", "%s", msg)
	}
	return join(v.errs)
}

type validator struct {
	c    *Config
	errs []*Error
}

// fail records a problem with key, sourced from the environment variable
// that set the key, if any, else from the file.
func (v *validator) fail(key, format string, args ...any) {
	src, line := v.c.Source, v.c.line(key)
	if env, ok := v.c.Overrides[key]; ok {
		src, line = env, 0
	}
	v.errs = append(v.errs, &Error{Source: src, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// text reports strings that are not valid UTF-8, which no config file
// format can carry (YAML's !!binary can smuggle them into a string field).
func (v *validator) text(rv reflect.Value, path []string) {
	switch rv.Kind() {
	case reflect.String:
		if !utf8.ValidString(rv.String()) {
			v.fail(keyPath(path...), "must be valid UTF-8 text")
		}
	case reflect.Pointer:
		if !rv.IsNil() {
			v.text(rv.Elem(), path)
		}
	case reflect.Struct:
		t := rv.Type()
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
			if t.Field(i).IsExported() && name != "-" && name != "" {
				v.text(rv.Field(i), with(path, name))
			}
		}
	case reflect.Slice:
		for i := range rv.Len() {
			v.text(rv.Index(i), with(path, index(i)))
		}
	case reflect.Map:
		keys := rv.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			if !utf8.ValidString(k.String()) {
				v.fail(keyPath(with(path, k.String())...), "key must be valid UTF-8 text")
				continue
			}
			v.text(rv.MapIndex(k), with(path, k.String()))
		}
	}
}

func (v *validator) sdk() {
	s := v.c.SDK
	if msg := checkListenAddr(s.SidecarAddr); msg != "" {
		v.fail("sdk.sidecar_addr", "%s", msg)
	}
	if msg := checkFailMode(s.FailMode); msg != "" {
		v.fail("sdk.fail_mode", "%s", msg)
	} else if s.FailMode == FailClosed && v.c.DevMode() {
		v.fail("sdk.fail_mode", "fail_mode=closed requires an identity source (%s): without one every bearer is accepted as anonymous (development mode)",
			strings.Join(IdentitySourceKeys(), " or "))
	}
	if s.JWKSURL != "" {
		if msg := checkURL(s.JWKSURL, true); msg != "" {
			v.fail("sdk.jwks_url", "%s", msg)
		}
	}
	for i, t := range s.AcceptedTenants {
		if strings.TrimSpace(t) == "" {
			v.fail(keyPath("sdk", "accepted_tenants", index(i)), "must not be empty")
		}
	}
	if s.SAML != nil {
		v.saml(*s.SAML)
	}
}

func (v *validator) saml(s SAML) {
	if s.EntityID == "" {
		v.fail("sdk.saml.entity_id", "must be set when [sdk.saml] is present")
	} else if _, err := url.Parse(s.EntityID); err != nil {
		v.fail("sdk.saml.entity_id", "must be a URL: %s", urlReason(err))
	}
	if s.ACSURL == "" {
		v.fail("sdk.saml.acs_url", "must be set when [sdk.saml] is present")
	} else if msg := checkURL(s.ACSURL, false); msg != "" {
		v.fail("sdk.saml.acs_url", "%s", msg)
	}
	switch {
	case s.IDPMetadataURL == "" && s.IDPMetadataFile == "":
		v.fail("sdk.saml.idp_metadata_url", "one of sdk.saml.idp_metadata_url and sdk.saml.idp_metadata_file must be set when [sdk.saml] is present")
	case s.IDPMetadataURL != "" && s.IDPMetadataFile != "":
		v.fail("sdk.saml.idp_metadata_file", "must not be set together with sdk.saml.idp_metadata_url")
	case s.IDPMetadataURL != "":
		if msg := checkURL(s.IDPMetadataURL, true); msg != "" {
			v.fail("sdk.saml.idp_metadata_url", "%s", msg)
		}
	}
	if s.ClockSkewSeconds < 0 || s.ClockSkewSeconds > 3600 {
		v.fail("sdk.saml.clock_skew_seconds", "must be from 0 to 3600, got %d", s.ClockSkewSeconds)
	}
	for _, a := range []struct{ key, attr string }{
		{"sdk.saml.attribute_mapping.email", s.AttributeMapping.Email},
		{"sdk.saml.attribute_mapping.role", s.AttributeMapping.Role},
		{"sdk.saml.attribute_mapping.tenant", s.AttributeMapping.Tenant},
	} {
		if strings.TrimSpace(a.attr) == "" {
			v.fail(a.key, "must name a SAML attribute")
		}
	}
	if s.SPPrivateKeyFile != "" && s.SPPrivateKeyPEM != "" {
		v.fail("sdk.saml.sp_private_key_pem", "must not be set together with sdk.saml.sp_private_key_file")
	}
	if s.SPCertificateFile != "" && s.SPCertificatePEM != "" {
		v.fail("sdk.saml.sp_certificate_pem", "must not be set together with sdk.saml.sp_certificate_file")
	}
	hasKey := s.SPPrivateKeyFile != "" || s.SPPrivateKeyPEM != ""
	hasCert := s.SPCertificateFile != "" || s.SPCertificatePEM != ""
	if hasKey != hasCert {
		v.fail("sdk.saml.sp_certificate_file", "the SP private key and certificate must be given together")
	}
	if d := s.TokenTTL.Duration; d <= 0 || d > MaxSAMLTokenTTL {
		v.fail("sdk.saml.token_ttl", "must be positive and at most %s, got %q", MaxSAMLTokenTTL, s.TokenTTL.String())
	}
	if p := wire.SAMLCookieNameProblem(s.CookieName); p != "" {
		v.fail("sdk.saml.cookie_name", "%s", p)
	}
	// Without Redis the replay store is per process: an unsolicited
	// assertion accepted by one replica, or before a restart, is accepted
	// again by the next. (A solicited one answers a request id minted
	// under a per-process key too, which another replica or a restart
	// does not accept.) Only a local trial, which nobody else can reach,
	// may do without.
	if s.AllowIDPInitiated && v.c.RateLimit.RedisAddr == "" {
		if why := v.c.ProductionSetting(); why != "" {
			v.fail("sdk.saml.allow_idp_initiated", "true requires rate_limit.redis_addr (SVC_REDIS_ADDR) outside %s; here %s: "+
				"without Redis the assertion replay cache is per process, so a replica or a restart would accept an unsolicited assertion again",
				LocalTrialRule(), why)
		}
	}
	if p := s.PathPrefix; !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.ContainsAny(p, "?#{} ") {
		v.fail("sdk.saml.path_prefix", "must be an absolute path without a trailing slash, got %q", p)
	}
	if _, ok := ReturnToPath(s.DefaultReturnTo); !ok || s.DefaultReturnTo == "" {
		v.fail("sdk.saml.default_return_to", "must be a relative path on this site, such as /home, got %q", s.DefaultReturnTo)
	}
	if n := s.ACSMaxConcurrent; n < 1 || n > 4096 {
		v.fail("sdk.saml.acs_max_concurrent", "must be from 1 to 4096, got %d", n)
	}
	if d := s.ACSTimeout.Duration; d <= 0 || d > 5*time.Minute {
		v.fail("sdk.saml.acs_timeout", "must be positive and at most 5m, got %q", s.ACSTimeout.String())
	}
}

func (v *validator) jwt() {
	j := v.c.JWT
	for _, d := range []struct {
		key string
		d   Duration
	}{
		{"jwt.clock_skew", j.ClockSkew}, {"jwt.cache_max_age", j.CacheMaxAge}, {"jwt.jwks_fetch_timeout", j.JWKSFetchTimeout},
		{"jwt.jwks_min_refresh", j.JWKSMinRefresh}, {"jwt.jwks_max_refresh", j.JWKSMaxRefresh},
	} {
		if d.d.Duration < 0 {
			v.fail(d.key, "must not be negative, got %q", d.d.String())
		}
	}
	if j.JWKSFetchTimeout.Duration == 0 {
		v.fail("jwt.jwks_fetch_timeout", "must be positive")
	}
	if j.JWKSMinRefresh.Duration > j.JWKSMaxRefresh.Duration {
		v.fail("jwt.jwks_min_refresh", "must not exceed jwt.jwks_max_refresh (%s > %s)",
			j.JWKSMinRefresh.Duration, j.JWKSMaxRefresh.Duration)
	}
	if j.CacheSize <= 0 {
		v.fail("jwt.cache_size", "must be positive, got %d", j.CacheSize)
	}
	for i, a := range j.Audiences {
		if strings.TrimSpace(a) == "" {
			v.fail(keyPath("jwt", "audiences", index(i)), "must not be empty")
		}
	}
	for i, t := range j.AllowedTyp {
		if strings.TrimSpace(t) == "" {
			v.fail(keyPath("jwt", "allowed_typ", index(i)), "must not be empty")
		}
	}
	v.issuerURL()
	v.issuers()
}

// issuerURL checks jwt.issuer_url: an identity source of its own, which
// names the keys sdk.jwks_url would, and the iss jwt.issuer would.
func (v *validator) issuerURL() {
	j := v.c.JWT
	if j.IssuerURL == "" {
		return
	}
	if msg := checkURL(j.IssuerURL, true); msg != "" {
		v.fail("jwt.issuer_url", "%s", msg)
	}
	if v.c.SDK.JWKSURL != "" {
		v.fail("jwt.issuer_url", "must not be set together with %s: the keys come from the issuer's discovery document; set one of them",
			v.c.Setting("sdk.jwks_url"))
	}
	if j.Issuer != "" && j.Issuer != j.IssuerURL {
		v.fail("jwt.issuer", "%q differs from jwt.issuer_url %q: tokens must carry the issuer URL as iss; unset jwt.issuer or make them equal",
			j.Issuer, j.IssuerURL)
	}
}

// issuers checks [[jwt.issuers]]: each entry names its keys one way,
// entries are told apart by iss, and the single-provider keys stay
// empty beside them.
func (v *validator) issuers() {
	j := v.c.JWT
	if len(j.Issuers) == 0 {
		return
	}
	for _, key := range []struct {
		name string
		set  bool
	}{{"sdk.jwks_url", v.c.SDK.JWKSURL != ""}, {"jwt.issuer_url", j.IssuerURL != ""}, {"jwt.issuer", j.Issuer != ""}} {
		if key.set {
			v.fail(key.name, "must be empty with [[jwt.issuers]]: each provider is set in its own [[jwt.issuers]] table")
		}
	}
	seen := map[string]int{}
	for i, is := range j.Issuers {
		key := func(field string) string { return keyPath("jwt", "issuers", index(i), field) }
		switch {
		case is.IssuerURL != "" && (is.Issuer != "" || is.JWKSURL != ""):
			v.fail(key("issuer_url"), "must not be set together with issuer or jwks_url: the keys come from the issuer's discovery document")
		case is.IssuerURL != "":
			if msg := checkURL(is.IssuerURL, true); msg != "" {
				v.fail(key("issuer_url"), "%s", msg)
			}
		case is.Issuer == "" || is.JWKSURL == "":
			v.fail(keyPath("jwt", "issuers", index(i)), "needs issuer_url, or issuer and jwks_url")
		default:
			if msg := checkURL(is.JWKSURL, true); msg != "" {
				v.fail(key("jwks_url"), "%s", msg)
			}
		}
		if iss := is.Iss(); iss != "" {
			if first, dup := seen[iss]; dup {
				field := "issuer"
				if is.IssuerURL != "" {
					field = "issuer_url"
				}
				v.fail(key(field), "%q is also the issuer of jwt.issuers[%d]: a token is routed by its iss, which must name one provider", iss, first)
			} else {
				seen[iss] = i
			}
		}
		if is.Tenant != "" && is.TenantClaim != "" {
			v.fail(key("tenant"), "must not be set together with tenant_claim: a fixed tenant reads no claim")
		}
		for k, a := range is.Audiences {
			if strings.TrimSpace(a) == "" {
				v.fail(keyPath("jwt", "issuers", index(i), "audiences", index(k)), "must not be empty")
			}
		}
	}
}

func (v *validator) tenants() {
	for _, id := range slices.Sorted(maps.Keys(v.c.Tenants)) {
		if strings.TrimSpace(id) == "" {
			v.fail(keyPath("tenants", id), "tenant id must not be empty")
		}
	}
}

// introspection checks [introspection]: an endpoint, and the client that
// asks it, whose secret lives in a file.
func (v *validator) introspection() {
	in := v.c.Introspection
	if in.URL == "" {
		for _, k := range []struct {
			key string
			set bool
		}{{"introspection.client_id", in.ClientID != ""}, {"introspection.client_secret_file", in.ClientSecretFile != ""}} {
			if k.set {
				v.fail(k.key, "is set but introspection.url is not")
			}
		}
		return
	}
	if msg := checkURL(in.URL, true); msg != "" {
		v.fail("introspection.url", "%s", msg)
	}
	if in.ClientID == "" {
		v.fail("introspection.client_id", "must be set with introspection.url")
	}
	if in.ClientSecretFile == "" {
		v.fail("introspection.client_secret_file", "must be set with introspection.url")
	}
	if strings.TrimSpace(in.TenantClaim) == "" {
		v.fail("introspection.tenant_claim", "must name a member of the introspection answer")
	}
	if in.CacheTTL.Duration <= 0 {
		v.fail("introspection.cache_ttl", "must be positive, got %q", in.CacheTTL.String())
	}
	if in.NegativeCacheTTL.Duration <= 0 {
		v.fail("introspection.negative_cache_ttl", "must be positive, got %q", in.NegativeCacheTTL.String())
	}
}

func (v *validator) rateLimit() {
	r := v.c.RateLimit
	if r.DefaultRPM < 0 {
		v.fail("rate_limit.default_rpm", "must not be negative, got %d", r.DefaultRPM)
	}
	for _, id := range slices.Sorted(maps.Keys(r.PerTenant)) {
		key := keyPath("rate_limit", "per_tenant", id)
		if strings.TrimSpace(id) == "" {
			v.fail(key, "tenant id must not be empty")
		}
		if rpm := r.PerTenant[id]; rpm < 0 {
			v.fail(key, "must not be negative, got %d", rpm)
		}
	}
	if r.RedisAddr != "" {
		if msg := checkHostPort(r.RedisAddr); msg != "" {
			v.fail("rate_limit.redis_addr", "%s", msg)
		}
	}
	for _, k := range []struct{ key, value string }{
		{"rate_limit.redis_username", r.RedisUsername},
		{"rate_limit.redis_password_file", r.RedisPasswordFile},
		{"rate_limit.redis_tls_ca_file", r.RedisTLSCAFile},
	} {
		if k.value != "" && r.RedisAddr == "" {
			v.fail(k.key, "is set without rate_limit.redis_addr (SVC_REDIS_ADDR)")
		}
	}
	if r.RedisTLS && r.RedisAddr == "" {
		v.fail("rate_limit.redis_tls", "is true without rate_limit.redis_addr (SVC_REDIS_ADDR)")
	}
	if r.RedisTLSCAFile != "" && !r.RedisTLS {
		v.fail("rate_limit.redis_tls_ca_file", "needs rate_limit.redis_tls = true (SVC_REDIS_TLS): the authorities verify a TLS connection")
	}
	if r.RedisUsername != "" && r.RedisPasswordFile == "" {
		v.fail("rate_limit.redis_password_file", "rate_limit.redis_username = %q needs a password file", r.RedisUsername)
	}
	if r.RedisTimeout.Duration <= 0 {
		v.fail("rate_limit.redis_timeout", "must be positive, got %q", r.RedisTimeout.String())
	}
	switch r.RedisFallback {
	case "local", "allow", "deny":
	default:
		v.fail("rate_limit.redis_fallback", `must be "local", "allow" or "deny", got %q`, r.RedisFallback)
	}
	if r.Replicas < 1 {
		v.fail("rate_limit.replicas", "must be at least 1, got %d", r.Replicas)
	}
}

func (v *validator) clientCerts() {
	cc := v.c.ClientCerts
	for _, td := range slices.Sorted(maps.Keys(cc.TrustDomains)) {
		key := keyPath("client_certs", "trust_domains", td)
		if err := clientcert.CheckTrustDomain(td); err != nil {
			v.fail(key, "must be a SPIFFE trust domain (lower-case letters, digits, '.', '-', '_'), got %q", td)
		}
		if strings.TrimSpace(cc.TrustDomains[td]) == "" {
			v.fail(key, "tenant id must not be empty")
		}
	}
	for _, id := range slices.Sorted(maps.Keys(cc.Roles)) {
		key := keyPath("client_certs", "roles", id)
		sid, err := clientcert.ParseID(id)
		if err != nil {
			v.fail(key, "must be a workload's SPIFFE ID such as \"spiffe://acme.example/ns/x/sa/y\", got %q", id)
			continue
		}
		if _, ok := cc.TrustDomains[sid.TrustDomain]; !ok {
			v.fail(key, "trust domain %q is not in client_certs.trust_domains: no certificate of it is accepted", sid.TrustDomain)
		}
		for _, r := range cc.Roles[id] {
			if strings.TrimSpace(r) == "" {
				v.fail(key, "a role must not be empty")
			}
		}
	}
}

func (v *validator) policy() {
	p := v.c.Policy
	if p.BundleURL != "" {
		if msg := checkURL(p.BundleURL, true); msg != "" {
			v.fail("policy.bundle_url", "%s", msg)
		}
		if p.BundleVerifyKeyFile == "" {
			v.fail("policy.bundle_url", "requires policy.bundle_verify_key_file: bundles from a control plane are always verified")
		}
	}
	if p.BundleMinPoll.Duration <= 0 {
		v.fail("policy.bundle_min_poll", "must be positive, got %q", p.BundleMinPoll.String())
	}
	if p.BundleMinPoll.Duration > p.BundleMaxPoll.Duration {
		v.fail("policy.bundle_min_poll", "must not exceed policy.bundle_max_poll (%s > %s)",
			p.BundleMinPoll.Duration, p.BundleMaxPoll.Duration)
	}
	if p.BundleMaxAge.Duration < 0 {
		v.fail("policy.bundle_max_age", "must not be negative (0 turns the check off), got %q", p.BundleMaxAge.String())
	}
	switch p.BundleMaxAgeAction {
	case BundleMaxAgeDegrade:
	case BundleMaxAgeRefuse:
		if p.BundleMaxAge.Duration == 0 {
			v.fail("policy.bundle_max_age_action", "%q requires policy.bundle_max_age: without a maximum age no bundle is too old", BundleMaxAgeRefuse)
		}
	default:
		v.fail("policy.bundle_max_age_action", "%s", checkBundleMaxAgeAction(p.BundleMaxAgeAction))
	}
	if d := p.DryRunEvalTimeout.Duration; d <= 0 || d > MaxDryRunEvalTimeout {
		v.fail("policy.dry_run_eval_timeout", "must be positive and at most %s, got %q", MaxDryRunEvalTimeout, p.DryRunEvalTimeout.String())
	}
	if msg := checkBundleMaxBytes(p.BundleMaxBytes); msg != "" {
		v.fail("policy.bundle_max_bytes", "%s", msg)
	}
	if msg := checkDecisionCacheSize(p.DecisionCacheSize); msg != "" {
		v.fail("policy.decision_cache_size", "%s", msg)
	}
}

func (v *validator) sidecar() {
	s := v.c.Sidecar
	if msg := checkListenAddr(s.HTTPAddr); msg != "" {
		v.fail("sidecar.http_addr", "%s", msg)
	}
	if msg := checkHostPort(s.SAMLAddr); msg != "" {
		v.fail("sidecar.saml_addr", "%s", msg)
	}
	if s.AdminRequireToken && s.AdminTokenFile == "" {
		v.fail("sidecar.admin_require_token", "admin_require_token=true requires sidecar.admin_token_file: no caller could use the admin endpoints")
	}
	if s.DrainTimeout.Duration < 0 {
		v.fail("sidecar.drain_timeout", "must not be negative, got %q", s.DrainTimeout.String())
	}
	if (s.TLSCertFile == "") != (s.TLSKeyFile == "") {
		v.fail("sidecar.tls_cert_file", "sidecar.tls_cert_file and sidecar.tls_key_file must be set together")
	}
	if s.TLSClientCAFile != "" && s.TLSCertFile == "" {
		v.fail("sidecar.tls_client_ca_file", "requires sidecar.tls_cert_file and sidecar.tls_key_file: client certificates are asked for over TLS")
	}
	if m, err := strconv.ParseUint(s.SocketMode, 8, 32); err != nil || m > 0o777 {
		v.fail("sidecar.socket_mode", "must be an octal file mode such as \"0660\", got %q", s.SocketMode)
	}
	for i, h := range s.AllowedHosts {
		if h == "" || strings.ContainsAny(h, " /:@") {
			v.fail(keyPath("sidecar", "allowed_hosts", index(i)), "must be a host name without port, got %q", h)
		}
	}
	if msg := checkCheckProxy(s.CheckProxy); msg != "" {
		v.fail("sidecar.check_proxy", "%s", msg)
	}
	for i, p := range s.TrustedProxies {
		if _, err := parseTrustedProxy(p); err != nil {
			v.fail(keyPath("sidecar", "trusted_proxies", index(i)), "%s", err)
		}
	}
	for i, f := range v.c.Envoy.FormatSuffixes {
		if msg := checkFormatSuffix(f); msg != "" {
			v.fail(keyPath("envoy", "format_suffixes", index(i)), "%s", msg)
		}
	}
	for i, r := range s.Routes {
		if msg := checkRoutePath(r.Path); msg != "" {
			v.fail(keyPath("sidecar", "routes", index(i), "path"), "%s", msg)
		}
		for j, m := range r.Methods {
			if !slices.Contains(httpMethods, m) {
				v.fail(keyPath("sidecar", "routes", index(i), "methods", index(j)),
					"must be one of %s, got %q", strings.Join(httpMethods, ", "), m)
			}
		}
	}
}

// checkFormatSuffix checks one envoy.format_suffixes entry: lower-case
// ASCII letters and digits, as the canonical path reports the format in
// input.request.format and policies compare it with "==".
func checkFormatSuffix(f string) string {
	if f == "" {
		return "must not be empty"
	}
	for i := 0; i < len(f); i++ {
		if c := f[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return fmt.Sprintf("must be lower-case letters and digits without the dot, such as \"json\", got %q", f)
		}
	}
	return ""
}

// checkFormatSuffixes is checkFormatSuffix on each entry, for the
// environment variable that sets them all.
func checkFormatSuffixes(fs []string) string {
	for _, f := range fs {
		if msg := checkFormatSuffix(f); msg != "" {
			return msg
		}
	}
	return ""
}

func checkCheckProxy(s string) string {
	switch s {
	case CheckProxyAuto, CheckProxyNginx, CheckProxyForwarded, CheckProxyEnvoy:
		return ""
	}
	return fmt.Sprintf("must be %q, %q, %q or %q, got %q", CheckProxyAuto, CheckProxyNginx, CheckProxyForwarded, CheckProxyEnvoy, s)
}

func checkFailMode(s string) string {
	if s != FailOpen && s != FailClosed {
		return fmt.Sprintf("must be %q or %q, got %q", FailOpen, FailClosed, s)
	}
	return ""
}

func checkLogLevel(s string) string {
	if !slices.Contains(logLevels, s) {
		return fmt.Sprintf("must be one of %s, got %q", strings.Join(logLevels, ", "), s)
	}
	return ""
}

func checkBundleMaxAgeAction(s string) string {
	if s != BundleMaxAgeDegrade && s != BundleMaxAgeRefuse {
		return fmt.Sprintf("must be %q or %q, got %q", BundleMaxAgeDegrade, BundleMaxAgeRefuse, s)
	}
	return ""
}

func checkPolicyMode(s string) string {
	if s != PolicyModeEnforce && s != PolicyModeDryRun {
		return fmt.Sprintf("must be %q or %q, got %q", PolicyModeEnforce, PolicyModeDryRun, s)
	}
	return ""
}

func checkAuditDestination(s string) string {
	switch {
	case s == "":
		return fmt.Sprintf("must be %q, %q, %q or a file path", AuditStdout, AuditStderr, AuditOff)
	case strings.ContainsRune(s, 0):
		return "file path must not contain a NUL byte"
	}
	return ""
}

// UnixScheme prefixes a listen address that is a Unix domain socket:
// "unix:///run/svc/grpc.sock".
const UnixScheme = "unix://"

// maxSocketPath is the longest socket path Linux accepts (sun_path).
const maxSocketPath = 107

// checkListenAddr accepts host:port, or unix:// and an absolute path.
func checkListenAddr(s string) string {
	path, ok := strings.CutPrefix(s, UnixScheme)
	if !ok {
		return checkHostPort(s)
	}
	switch {
	case !strings.HasPrefix(path, "/"):
		return fmt.Sprintf("a Unix socket address must be unix:// and an absolute path, got %q", s)
	case len(path) > maxSocketPath:
		return fmt.Sprintf("Unix socket path longer than %d bytes: %q", maxSocketPath, path)
	case strings.ContainsRune(path, 0):
		return "Unix socket path must not contain a NUL byte"
	}
	return ""
}

// checkHostPort accepts host:port with a numeric port in 0-65535; the
// host may be empty (all interfaces).
func checkHostPort(s string) string {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("must be host:port, got %q", s)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil || strings.ContainsAny(port, "+-") {
		return fmt.Sprintf("port must be a number from 0 to 65535, got %q", port)
	}
	return ""
}

// checkURL accepts an absolute http or https URL with a host and no user
// information. With httpsOnly, plain http is accepted only on a loopback
// host, because the document fetched there is trusted key material.
func checkURL(s string, httpsOnly bool) string {
	u, err := url.Parse(s)
	if err != nil {
		return "must be a URL: " + urlReason(err)
	}
	if u.User != nil {
		return fmt.Sprintf("must not carry credentials, got %q", u.Redacted())
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Hostname() == "" {
		return fmt.Sprintf("must be an absolute http(s) URL with a host, got %q", u.Redacted())
	}
	if httpsOnly && u.Scheme == "http" && !loopback.Host(u.Hostname()) {
		return fmt.Sprintf("must use https (http only on a loopback host), got %q", u.Redacted())
	}
	return ""
}

// urlReason returns why url.Parse failed without repeating the URL, which
// could carry a password.
func urlReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return "unparseable"
}

// checkRoutePath accepts an absolute path whose "{name}" placeholders are
// closed, not nested and named.
func checkRoutePath(p string) string {
	if !strings.HasPrefix(p, "/") {
		return fmt.Sprintf("must start with \"/\", got %q", p)
	}
	open := -1
	for i, r := range p {
		switch r {
		case '{':
			if open >= 0 {
				return fmt.Sprintf("placeholders must not nest, got %q", p)
			}
			open = i
		case '}':
			if open < 0 {
				return fmt.Sprintf("unbalanced \"}\", got %q", p)
			}
			if i == open+1 {
				return fmt.Sprintf("placeholder must have a name, got %q", p)
			}
			open = -1
		}
	}
	if open >= 0 {
		return fmt.Sprintf("unclosed \"{\", got %q", p)
	}
	return ""
}

// checkDecisionCacheSize says what is wrong with a
// policy.decision_cache_size, or "".
func checkDecisionCacheSize(n int) string {
	if n < MinDecisionCacheSize || n > MaxDecisionCacheSize {
		return fmt.Sprintf("must be between %d and %d entries, got %d", MinDecisionCacheSize, MaxDecisionCacheSize, n)
	}
	return ""
}

// checkBundleMaxBytes says what is wrong with a policy.bundle_max_bytes,
// or "".
func checkBundleMaxBytes(n int64) string {
	if n < MinBundleMaxBytes || n > MaxBundleMaxBytes {
		return fmt.Sprintf("must be between %d (1 MiB) and %d (1 GiB) bytes, got %d", MinBundleMaxBytes, MaxBundleMaxBytes, n)
	}
	return ""
}
