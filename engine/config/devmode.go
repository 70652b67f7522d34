package config

import (
	"fmt"
	"strings"

	"github.com/svc-dev/svc/engine/loopback"
)

// SAMLSource is the identity source of the SAML gateway ([sdk.saml]) in
// IdentitySources: the only one a local trial of the gateway may have.
const SAMLSource = "sdk.saml"

// identitySources is every setting that makes the engine verify who the
// caller is. It is the one list that decides development mode: a new
// kind of identity (an introspection endpoint, API keys, client
// certificates, an OIDC relying party) is added here, and the table test
// of IdentitySources then proves it turns development mode off.
var identitySources = []struct {
	key string
	set func(Config) bool
}{
	{"sdk.jwks_url", func(c Config) bool { return c.SDK.JWKSURL != "" }},
	{SAMLSource, func(c Config) bool { return c.SDK.SAML != nil }},
	{"jwt.issuer_url", func(c Config) bool { return c.JWT.IssuerURL != "" }},
	{"jwt.issuers", func(c Config) bool { return len(c.JWT.Issuers) > 0 }},
	{"api_keys.file", func(c Config) bool { return c.APIKeys.File != "" }},
	{"client_certs.trust_domains", func(c Config) bool { return len(c.ClientCerts.TrustDomains) > 0 }},
	{"introspection.url", func(c Config) bool { return c.Introspection.URL != "" }},
	{OIDCSource, func(c Config) bool { return c.SDK.OIDC != nil }},
}

// OIDCSource is the identity source of browser sign-in with OpenID
// Connect ([sdk.oidc]) in IdentitySources.
const OIDCSource = "sdk.oidc"

// IdentitySourceKeys names every setting that can be an identity source,
// in the order IdentitySources reports them, for messages that say what
// a configuration lacks.
func IdentitySourceKeys() []string {
	keys := make([]string, len(identitySources))
	for i, s := range identitySources {
		keys[i] = s.key
	}
	return keys
}

// IdentitySources returns the settings of c that verify callers (such as
// "sdk.jwks_url" and "sdk.saml"), in a fixed order; none means
// development mode.
func (c Config) IdentitySources() []string {
	var keys []string
	for _, s := range identitySources {
		if s.set(c) {
			keys = append(keys, s.key)
		}
	}
	return keys
}

// DevMode reports whether the engine runs without any identity source, so
// that every bearer string is accepted as the anonymous caller. It is a
// state of the configuration, never inferred from sdk.fail_mode: a
// SAML-only deployment verifies the tokens its gateway issues, and
// fail_mode = "closed" without an identity source is refused by Validate
// rather than read as "not development".
func (c Config) DevMode() bool {
	for _, s := range identitySources {
		if s.set(c) {
			return false
		}
	}
	return true
}

// Listener is a listen address of the sidecar and the key that sets it.
type Listener struct {
	Key, Addr string
}

// Listeners returns the addresses the sidecar listens on with c: gRPC
// (sdk.sidecar_addr), the HTTP API (sidecar.http_addr) and, with
// [sdk.saml], sign-in (sidecar.saml_addr).
func (c Config) Listeners() []Listener {
	ls := []Listener{{"sdk.sidecar_addr", c.SDK.SidecarAddr}, {"sidecar.http_addr", c.Sidecar.HTTPAddr}}
	if c.SDK.SAML != nil {
		ls = append(ls, Listener{"sidecar.saml_addr", c.Sidecar.SAMLAddr})
	} else if c.SDK.OIDC != nil {
		ls = append(ls, Listener{"sidecar.signin_addr", c.Sidecar.SigninAddr})
	}
	return ls
}

// ProductionSetting names the first setting that makes c a production
// configuration of the SAML gateway, as the start of a sentence such as
// `sidecar.saml_addr (SVC_SAML_ADDR) "0.0.0.0:7701" is not a loopback
// address` or "sdk.jwks_url (svc.toml:3) is set"; it is "" for a local
// trial: every listener on a loopback address or a Unix socket, and no
// identity source but the SAML gateway.
//
// Only a local trial may skip SAML signature checks (SVC_ENV=development)
// or accept IdP-initiated sign-on without a replay store that replicas
// and restarts share: both let whoever can reach the sign-in listener
// sign in as anyone, which on loopback is only this host's own user. An
// identity source besides the gateway means real users already sign in
// another way, so the configuration serves them.
func (c Config) ProductionSetting() string {
	for _, key := range c.IdentitySources() {
		if key != SAMLSource {
			return c.Setting(key) + " is set"
		}
	}
	for _, l := range c.Listeners() {
		if !loopback.ListenAddr(l.Addr) {
			return fmt.Sprintf("%s %q is not a loopback address", c.Setting(l.Key), l.Addr)
		}
	}
	return ""
}

// LocalTrialRule says in words what ProductionSetting checks ("a local
// trial (...)"), for the errors that refuse a setting of a local trial in
// a production configuration.
func LocalTrialRule() string {
	var others []string
	for _, k := range IdentitySourceKeys() {
		if k != SAMLSource {
			others = append(others, k)
		}
	}
	return "a local trial (every listener: sdk.sidecar_addr, sidecar.http_addr, sidecar.saml_addr, on a loopback address " +
		"or a Unix socket, and no identity source but [sdk.saml]: no " + strings.Join(others, ", no ") + ")"
}
