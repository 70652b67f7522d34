package config

import (
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/wire"
)

// Browser sign-in: the session every sign-in issues ([sdk.session]), the
// OpenID Connect relying party ([sdk.oidc]) beside the SAML gateway, and
// the listener both are served on (sidecar.signin_addr).

// Session is the [sdk.session] table: the session a browser gets from any
// sign-in, SAML or OpenID Connect. It is the sidecar's own short-lived
// JWT in a cookie, which every check path accepts. The keys of the same
// names in [sdk.saml] are older names of these; setting a key in both
// tables is an error.
type Session struct {
	// CookieName is the session cookie that carries the session token;
	// the checks read it when a request has no Authorization header.
	// Wherever the gateways' cookies are Secure they set
	// __Host-<cookie_name>; name it here without the prefix. Default
	// "svc_session". Env SVC_SESSION_COOKIE_NAME.
	CookieName string `toml:"cookie_name" yaml:"cookie_name"`
	// TokenTTL is the lifetime of the session tokens. Default 15m, at
	// most 24h. Env SVC_SESSION_TOKEN_TTL.
	TokenTTL Duration `toml:"token_ttl" yaml:"token_ttl"`
	// RefreshBefore is how long before its expiry the checks renew an
	// OpenID Connect session that holds a refresh token (offline_access),
	// delivering the new session cookie with their answer. Default a
	// quarter of token_ttl; less than token_ttl.
	// Env SVC_SESSION_REFRESH_BEFORE.
	RefreshBefore Duration `toml:"refresh_before,omitempty" yaml:"refresh_before,omitempty"`
	// TokenSigningKeyFile is an EC P-256 private key (PEM) that signs the
	// session tokens; replicas share it. Without it a key is generated
	// at start. Env SVC_SESSION_TOKEN_SIGNING_KEY_FILE.
	TokenSigningKeyFile string `toml:"token_signing_key_file" yaml:"token_signing_key_file"`
	// DefaultReturnTo is where sign-in and logout send the browser when no
	// return_to names a page: a relative path on this site. Default "/".
	// Env SVC_SESSION_DEFAULT_RETURN_TO.
	DefaultReturnTo string `toml:"default_return_to" yaml:"default_return_to"`
	// BrowserRedirect sends a browser without a valid session to the
	// sign-in (a 302 from Envoy and Caddy, a 401 with X-Svc-Login for
	// nginx) instead of the 401. Default true.
	// Env SVC_SESSION_BROWSER_REDIRECT.
	BrowserRedirect *bool `toml:"browser_redirect" yaml:"browser_redirect"`
	// Issuer is the iss and aud of the session tokens. Default
	// sdk.saml.entity_id with [sdk.saml], else the origin of
	// sdk.oidc.redirect_url. Env SVC_SESSION_ISSUER.
	Issuer string `toml:"issuer" yaml:"issuer"`
}

// RenewWindow is how long before its expiry a session is renewed:
// refresh_before, else a quarter of token_ttl.
func (s Session) RenewWindow() time.Duration {
	if s.RefreshBefore.Duration > 0 {
		return s.RefreshBefore.Duration
	}
	return s.TokenTTL.Duration / 4
}

// RedirectsBrowsers reports whether browser_redirect is on (its default).
func (s Session) RedirectsBrowsers() bool { return s.BrowserRedirect == nil || *s.BrowserRedirect }

// OIDC is the [sdk.oidc] table. Its presence turns the OpenID Connect
// relying party on: svc-sidecar serves login, callback, logout and
// back-channel logout on sidecar.signin_addr under PathPrefix. The keys
// of the table are one provider (named "default"); [[sdk.oidc.providers]]
// adds others, each for a tenant.
type OIDC struct {
	// IssuerURL is the provider's issuer; its discovery document
	// (/.well-known/openid-configuration) gives the endpoints and the
	// keys ID tokens are verified with. https, or http on a loopback
	// host. Env SVC_OIDC_ISSUER_URL.
	IssuerURL string `toml:"issuer_url" yaml:"issuer_url"`
	// ClientID is this relying party's client id at the provider; ID
	// tokens must name it in aud. Env SVC_OIDC_CLIENT_ID.
	ClientID string `toml:"client_id" yaml:"client_id"`
	// ClientSecretFile holds the client secret (never inline in the
	// configuration); empty for a public client, which PKCE protects.
	// Env SVC_OIDC_CLIENT_SECRET_FILE.
	ClientSecretFile string `toml:"client_secret_file" yaml:"client_secret_file"`
	// RedirectURL is the callback registered at the provider, such as
	// https://app.example.com/auth/oidc/callback: its path is
	// PathPrefix+"/callback". Env SVC_OIDC_REDIRECT_URL.
	RedirectURL string `toml:"redirect_url" yaml:"redirect_url"`
	// Scopes asked for. Default openid, email, profile; offline_access
	// lets sessions be refreshed. Env SVC_OIDC_SCOPES (comma-separated).
	Scopes []string `toml:"scopes" yaml:"scopes"`
	// ClaimMapping names the ID token claims that fill the session's.
	ClaimMapping ClaimMapping `toml:"claim_mapping" yaml:"claim_mapping"`
	// PathPrefix is where the endpoints are mounted. Default "/auth/oidc".
	// Env SVC_OIDC_PATH_PREFIX.
	PathPrefix string `toml:"path_prefix" yaml:"path_prefix"`
	// Providers are further providers, each signing in one tenant.
	Providers []OIDCProvider `toml:"providers" yaml:"providers"`
}

// OIDCProvider is one [[sdk.oidc.providers]] entry. Keys left empty take
// the value of [sdk.oidc] (all but issuer_url and client_id).
type OIDCProvider struct {
	// Name identifies the provider in the login page and in status.
	Name string `toml:"name" yaml:"name"`
	// Tenant is the tenant whose users sign in with it; its ID tokens
	// must carry that tenant, or none (then the tenant is this one).
	Tenant string `toml:"tenant" yaml:"tenant"`
	// IssuerURL, ClientID, ClientSecretFile, RedirectURL, Scopes and
	// ClaimMapping are as in [sdk.oidc].
	IssuerURL        string       `toml:"issuer_url" yaml:"issuer_url"`
	ClientID         string       `toml:"client_id" yaml:"client_id"`
	ClientSecretFile string       `toml:"client_secret_file" yaml:"client_secret_file"`
	RedirectURL      string       `toml:"redirect_url" yaml:"redirect_url"`
	Scopes           []string     `toml:"scopes" yaml:"scopes"`
	ClaimMapping     ClaimMapping `toml:"claim_mapping" yaml:"claim_mapping"`
}

// ClaimMapping names the ID token claims that fill the session's claims.
type ClaimMapping struct {
	// Tenant fills tenant_id. Default "tenant_id". Env SVC_OIDC_CLAIM_TENANT.
	Tenant string `toml:"tenant" yaml:"tenant"`
	// Roles fills roles (a string or a list). Default "roles".
	// Env SVC_OIDC_CLAIM_ROLES.
	Roles string `toml:"roles" yaml:"roles"`
	// Email fills email. Default "email". Env SVC_OIDC_CLAIM_EMAIL.
	Email string `toml:"email" yaml:"email"`
}

// DefaultOIDCProvider is the name of the provider of [sdk.oidc]'s own keys.
const DefaultOIDCProvider = "default"

// Defaults of [sdk.oidc].
const (
	DefaultOIDCPathPrefix  = "/auth/oidc"
	DefaultOIDCClaimTenant = "tenant_id"
	DefaultOIDCClaimRoles  = "roles"
	DefaultOIDCClaimEmail  = "email"
)

// DefaultOIDCScopes are sdk.oidc.scopes' default.
func DefaultOIDCScopes() []string { return []string{"openid", "email", "profile"} }

// All returns every provider: [sdk.oidc]'s own keys first (when
// issuer_url is set, named DefaultOIDCProvider), then
// [[sdk.oidc.providers]], each with the keys it leaves empty taken from
// [sdk.oidc].
func (o *OIDC) All() []OIDCProvider {
	if o == nil {
		return nil
	}
	var ps []OIDCProvider
	if o.IssuerURL != "" {
		ps = append(ps, OIDCProvider{Name: DefaultOIDCProvider, IssuerURL: o.IssuerURL, ClientID: o.ClientID,
			ClientSecretFile: o.ClientSecretFile, RedirectURL: o.RedirectURL, Scopes: o.Scopes, ClaimMapping: o.ClaimMapping})
	}
	for _, p := range o.Providers {
		setString(&p.RedirectURL, o.RedirectURL)
		if len(p.Scopes) == 0 {
			p.Scopes = o.Scopes
		}
		setString(&p.ClaimMapping.Tenant, o.ClaimMapping.Tenant)
		setString(&p.ClaimMapping.Roles, o.ClaimMapping.Roles)
		setString(&p.ClaimMapping.Email, o.ClaimMapping.Email)
		ps = append(ps, p)
	}
	return ps
}

// SignIn reports whether a browser sign-in ([sdk.saml] or [sdk.oidc]) is
// configured, and with it the session ([sdk.session]) and the sign-in
// listener.
func (c Config) SignIn() bool { return c.SDK.SAML != nil || c.SDK.OIDC != nil }

// bothSet reports whether key and its older name old are set in the
// same place: both in the file or both by SVC_* variables. A variable
// overrides the file under either name.
func (c Config) bothSet(key, old string) bool {
	_, envNew := c.Overrides[key]
	_, envOld := c.Overrides[old]
	_, fileNew := c.Lines[key]
	_, fileOld := c.Lines[old]
	return envNew && envOld || fileNew && fileOld
}

// sessionAliases pairs each [sdk.session] key with its older [sdk.saml] name.
func (c *Config) sessionAliases(apply func(key, old string, cur, alias any)) {
	s, a := &c.SDK.Session, c.SDK.SAML
	if a == nil {
		a = &SAML{}
	}
	apply("sdk.session.cookie_name", "sdk.saml.cookie_name", &s.CookieName, &a.CookieName)
	apply("sdk.session.token_ttl", "sdk.saml.token_ttl", &s.TokenTTL, &a.TokenTTL)
	apply("sdk.session.token_signing_key_file", "sdk.saml.token_signing_key_file", &s.TokenSigningKeyFile, &a.TokenSigningKeyFile)
	apply("sdk.session.default_return_to", "sdk.saml.default_return_to", &s.DefaultReturnTo, &a.DefaultReturnTo)
	apply("sdk.session.browser_redirect", "sdk.saml.browser_redirect", &s.BrowserRedirect, &a.BrowserRedirect)
}

// setSignInDefaults fills [sdk.session] from its [sdk.saml] aliases and
// its defaults, then the aliases from it (the SAML gateway reads them),
// and does the same for sidecar.signin_addr and sidecar.saml_addr. Of a
// key and its older name, the one an SVC_* variable set wins (the
// environment overrides the file), then the one the file set.
func (c *Config) setSignInDefaults() {
	c.sessionAliases(func(key, old string, cur, alias any) {
		if c.newerWins(key, old, alias) {
			copyValue(alias, cur)
		} else {
			copyValue(cur, alias)
		}
	})
	if c.newerWins("sidecar.signin_addr", "sidecar.saml_addr", &c.Sidecar.SAMLAddr) {
		c.Sidecar.SAMLAddr = c.Sidecar.SigninAddr
	} else {
		c.Sidecar.SigninAddr = c.Sidecar.SAMLAddr
	}
	setString(&c.Sidecar.SigninAddr, DefaultSAMLAddr)
	setString(&c.Sidecar.SAMLAddr, DefaultSAMLAddr)
	if !c.SignIn() {
		return
	}
	s := &c.SDK.Session
	setString(&s.CookieName, DefaultSAMLCookieName)
	setDuration(&s.TokenTTL, DefaultSAMLTokenTTL)
	setString(&s.DefaultReturnTo, DefaultSAMLReturnTo)
	if s.BrowserRedirect == nil {
		on := true
		s.BrowserRedirect = &on
	}
	if c.SDK.SAML != nil {
		setString(&s.Issuer, c.SDK.SAML.EntityID)
		c.sessionAliases(func(_, _ string, cur, alias any) { copyValue(alias, cur) })
	}
	if o := c.SDK.OIDC; o != nil {
		setString(&s.Issuer, originOf(o.RedirectURL))
		setString(&o.PathPrefix, DefaultOIDCPathPrefix)
		if len(o.Scopes) == 0 {
			o.Scopes = DefaultOIDCScopes()
		}
		setString(&o.ClaimMapping.Tenant, DefaultOIDCClaimTenant)
		setString(&o.ClaimMapping.Roles, DefaultOIDCClaimRoles)
		setString(&o.ClaimMapping.Email, DefaultOIDCClaimEmail)
	}
}

// newerWins reports whether key's value decides over its older name old
// (whose value is at alias): set by the environment, else set by the
// file while old is not, else (a Config built in code, which may set the
// older name after defaults were applied) when old is zero.
func (c Config) newerWins(key, old string, alias any) bool {
	_, envNew := c.Overrides[key]
	_, envOld := c.Overrides[old]
	_, fileNew := c.Lines[key]
	_, fileOld := c.Lines[old]
	switch {
	case envNew || envOld:
		return envNew
	case fileNew || fileOld:
		return fileNew
	}
	return reflect.ValueOf(alias).Elem().IsZero()
}

// copyValue sets *dst to *src, both pointers to the same type.
func copyValue(dst, src any) {
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
}

// withoutOlderNames returns c with the older names of the keys of
// [sdk.session] and sidecar.signin_addr cleared where the new name holds
// the value, so that writing it out sets each key once.
func (c Config) withoutOlderNames() Config {
	if c.SDK.SAML != nil {
		s := *c.SDK.SAML
		c.SDK.SAML = &s
		c.sessionAliases(func(_, _ string, cur, alias any) {
			if v := reflect.ValueOf(alias).Elem(); !reflect.ValueOf(cur).Elem().IsZero() {
				v.SetZero()
			}
		})
	}
	if c.Sidecar.SigninAddr != "" {
		c.Sidecar.SAMLAddr = ""
	}
	return c
}

// originOf is the scheme://host[:port] of u, "" when u is no URL.
func originOf(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" || p.Host == "" {
		return ""
	}
	return p.Scheme + "://" + p.Host
}

// signIn checks the aliases, [sdk.session] and [sdk.oidc].
func (v *validator) signIn() {
	c := v.c
	if c.bothSet("sidecar.signin_addr", "sidecar.saml_addr") {
		v.fail("sidecar.signin_addr", "must not be set together with sidecar.saml_addr (%s), its older name; keep sidecar.signin_addr", c.Origin("sidecar.saml_addr"))
	} else if msg := checkHostPort(c.Sidecar.SigninAddr); msg != "" {
		v.fail("sidecar.signin_addr", "%s", msg)
	}
	c.sessionAliases(func(key, old string, _, _ any) {
		if c.bothSet(key, old) {
			v.fail(key, "must not be set together with %s (%s), its older name; keep %s", old, c.Origin(old), key)
		}
	})
	if !c.SignIn() {
		return
	}
	s := c.SDK.Session
	if c.SDK.SAML == nil { // with [sdk.saml] its checks of the aliases apply
		if d := s.TokenTTL.Duration; d <= 0 || d > MaxSAMLTokenTTL {
			v.fail("sdk.session.token_ttl", "must be positive and at most %s, got %q", MaxSAMLTokenTTL, s.TokenTTL.String())
		}
		if !wire.ValidCookieName(s.CookieName) || strings.HasPrefix(strings.ToLower(s.CookieName), "__") {
			v.fail("sdk.session.cookie_name", "must be a cookie name (letters, digits, '-', '_', '.') without the __Host- prefix, got %q", s.CookieName)
		}
		if _, ok := ReturnToPath(s.DefaultReturnTo); !ok || s.DefaultReturnTo == "" {
			v.fail("sdk.session.default_return_to", "must be a relative path on this site, such as /home, got %q", s.DefaultReturnTo)
		}
	}
	if d := s.RefreshBefore.Duration; d < 0 || d > 0 && d >= s.TokenTTL.Duration {
		v.fail("sdk.session.refresh_before", "must be positive and less than sdk.session.token_ttl (%s), got %q", s.TokenTTL.String(), s.RefreshBefore.String())
	}
	if s.Issuer == "" {
		v.fail("sdk.session.issuer", "must be set: it is the iss of the session tokens (default sdk.saml.entity_id, or the origin of sdk.oidc.redirect_url)")
	}
	if c.SDK.OIDC != nil {
		v.oidc(*c.SDK.OIDC)
	}
}

func (v *validator) oidc(o OIDC) {
	if p := o.PathPrefix; !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.ContainsAny(p, "?#{} ") {
		v.fail("sdk.oidc.path_prefix", "must be an absolute path without a trailing slash, got %q", p)
	}
	if sp := v.c.SDK.SAML; sp != nil && sp.PathPrefix == o.PathPrefix {
		v.fail("sdk.oidc.path_prefix", "must differ from sdk.saml.path_prefix, got %q for both", o.PathPrefix)
	}
	ps := o.All()
	if len(ps) == 0 {
		v.fail("sdk.oidc.issuer_url", "must be set when [sdk.oidc] is present (or a [[sdk.oidc.providers]] entry)")
	}
	names := map[string]bool{}
	offset := len(ps) - len(o.Providers)
	for i, p := range ps {
		prefix := "sdk.oidc."
		if i >= offset {
			prefix = keyPath("sdk", "oidc", "providers", index(i-offset)) + "."
			if strings.TrimSpace(p.Name) == "" || strings.ContainsAny(p.Name, " /?#&") {
				v.fail(prefix+"name", "must be a name without spaces or / ? # &, got %q", p.Name)
			} else if names[p.Name] {
				v.fail(prefix+"name", "must be unique, %q is taken", p.Name)
			}
			if strings.TrimSpace(p.Tenant) == "" {
				v.fail(prefix+"tenant", "must name the tenant whose users sign in with this provider")
			}
		}
		names[p.Name] = true
		if p.IssuerURL == "" {
			v.fail(prefix+"issuer_url", "must be set")
		} else if msg := checkURL(p.IssuerURL, true); msg != "" {
			v.fail(prefix+"issuer_url", "%s", msg)
		}
		if p.ClientID == "" {
			v.fail(prefix+"client_id", "must be set")
		}
		if p.RedirectURL == "" {
			v.fail(prefix+"redirect_url", "must be set: the callback URL registered at the provider, such as https://app.example.com%s/callback", o.PathPrefix)
		} else if msg := checkURL(p.RedirectURL, false); msg != "" {
			v.fail(prefix+"redirect_url", "%s", msg)
		}
		openid := false
		for _, s := range p.Scopes {
			openid = openid || s == "openid"
			if s == "" || strings.ContainsAny(s, " \"\\") {
				v.fail(prefix+"scopes", "must be scope tokens without spaces, got %q", s)
			}
		}
		if !openid {
			v.fail(prefix+"scopes", "must include openid")
		}
	}
}

// sessionDuration applies a variable of an [sdk.session] duration with
// set; example is a valid value, for the error.
func sessionDuration(example string, set func(*Session, Duration)) func(*Config, string) string {
	return func(c *Config, v string) string {
		d, err := time.ParseDuration(v)
		if err != nil {
			return "must be a Go duration such as " + example + ", got " + strconv.Quote(v)
		}
		set(&c.SDK.Session, Duration{d})
		return ""
	}
}

// signInEnv are the variables of [sdk.session], [sdk.oidc] and
// sidecar.signin_addr. Every SVC_OIDC_* variable creates [sdk.oidc] when
// the file has none.
var signInEnv = []EnvVar{
	{Name: "SVC_SIGNIN_ADDR", Key: "sidecar.signin_addr",
		Help:  `Listen address (host:port) of browser sign-in (SAML and OpenID Connect). Default "127.0.0.1:7701".`,
		apply: func(c *Config, v string) string { c.Sidecar.SigninAddr = v; return "" }},
	{Name: "SVC_SESSION_COOKIE_NAME", Key: "sdk.session.cookie_name",
		Help:  `Session cookie of browser sign-in. Default "svc_session".`,
		apply: func(c *Config, v string) string { c.SDK.Session.CookieName = v; return "" }},
	{Name: "SVC_SESSION_TOKEN_TTL", Key: "sdk.session.token_ttl",
		Help:  "Lifetime of the session tokens (Go duration). Default 15m.",
		apply: sessionDuration("15m", func(s *Session, d Duration) { s.TokenTTL = d })},
	{Name: "SVC_SESSION_REFRESH_BEFORE", Key: "sdk.session.refresh_before",
		Help:  "How long before expiry the checks renew an OpenID Connect session (Go duration). Default token_ttl/4.",
		apply: sessionDuration("4m", func(s *Session, d Duration) { s.RefreshBefore = d })},
	{Name: "SVC_SESSION_TOKEN_SIGNING_KEY_FILE", Key: "sdk.session.token_signing_key_file",
		Help:  "EC P-256 private key (PEM) that signs the session tokens, shared by replicas.",
		apply: func(c *Config, v string) string { c.SDK.Session.TokenSigningKeyFile = v; return "" }},
	{Name: "SVC_SESSION_DEFAULT_RETURN_TO", Key: "sdk.session.default_return_to",
		Help:  `Relative path where sign-in and logout land without return_to. Default "/".`,
		apply: func(c *Config, v string) string { c.SDK.Session.DefaultReturnTo = v; return "" }},
	{Name: "SVC_SESSION_BROWSER_REDIRECT", Key: "sdk.session.browser_redirect",
		Help: "false answers browsers without a session 401 instead of sending them to sign in. Default true.",
		apply: func(c *Config, v string) string {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "must be true or false, got " + strconv.Quote(v)
			}
			c.SDK.Session.BrowserRedirect = &b
			return ""
		}},
	{Name: "SVC_SESSION_ISSUER", Key: "sdk.session.issuer",
		Help:  "iss and aud of the session tokens. Default sdk.saml.entity_id, else the origin of sdk.oidc.redirect_url.",
		apply: func(c *Config, v string) string { c.SDK.Session.Issuer = v; return "" }},
	{Name: "SVC_OIDC_ISSUER_URL", Key: "sdk.oidc.issuer_url",
		Help:  "Issuer of the OpenID provider browsers sign in with (https, or http on a loopback host).",
		apply: func(c *Config, v string) string { oidcOf(c).IssuerURL = v; return "" }},
	{Name: "SVC_OIDC_CLIENT_ID", Key: "sdk.oidc.client_id",
		Help:  "Client id of the sidecar at the OpenID provider.",
		apply: func(c *Config, v string) string { oidcOf(c).ClientID = v; return "" }},
	{Name: "SVC_OIDC_CLIENT_SECRET_FILE", Key: "sdk.oidc.client_secret_file",
		Help:  "File holding the OpenID Connect client secret.",
		apply: func(c *Config, v string) string { oidcOf(c).ClientSecretFile = v; return "" }},
	{Name: "SVC_OIDC_REDIRECT_URL", Key: "sdk.oidc.redirect_url",
		Help:  "Callback URL registered at the OpenID provider, ending in <path_prefix>/callback.",
		apply: func(c *Config, v string) string { oidcOf(c).RedirectURL = v; return "" }},
	{Name: "SVC_OIDC_SCOPES", Key: "sdk.oidc.scopes",
		Help:  "Comma-separated scopes asked of the OpenID provider. Default openid,email,profile.",
		apply: func(c *Config, v string) string { oidcOf(c).Scopes = commaList(v); return "" }},
	{Name: "SVC_OIDC_CLAIM_TENANT", Key: "sdk.oidc.claim_mapping.tenant",
		Help:  `ID token claim that fills tenant_id. Default "tenant_id".`,
		apply: func(c *Config, v string) string { oidcOf(c).ClaimMapping.Tenant = v; return "" }},
	{Name: "SVC_OIDC_CLAIM_ROLES", Key: "sdk.oidc.claim_mapping.roles",
		Help:  `ID token claim that fills roles. Default "roles".`,
		apply: func(c *Config, v string) string { oidcOf(c).ClaimMapping.Roles = v; return "" }},
	{Name: "SVC_OIDC_CLAIM_EMAIL", Key: "sdk.oidc.claim_mapping.email",
		Help:  `ID token claim that fills email. Default "email".`,
		apply: func(c *Config, v string) string { oidcOf(c).ClaimMapping.Email = v; return "" }},
	{Name: "SVC_OIDC_PATH_PREFIX", Key: "sdk.oidc.path_prefix",
		Help:  `Path prefix of the OpenID Connect endpoints. Default "/auth/oidc".`,
		apply: func(c *Config, v string) string { oidcOf(c).PathPrefix = v; return "" }},
}

// oidcOf returns c's [sdk.oidc] table, creating it when absent.
func oidcOf(c *Config) *OIDC {
	if c.SDK.OIDC == nil {
		c.SDK.OIDC = &OIDC{}
	}
	return c.SDK.OIDC
}
