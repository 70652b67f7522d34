package authz

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/pelletier/go-toml/v2"
	"github.com/svc-dev/svc/wire"
)

// DefaultConfigFile is the file NewClient reads, in the working directory,
// for what the caller leaves unset: the [sdk] keys sidecar_addr and
// fail_mode, and the session cookie's name and the sign-in gateways'
// public URLs ([sdk.session], [sdk.saml], [sdk.oidc]), as the sidecar and
// the other SDKs do.
const DefaultConfigFile = "svc.toml"

// DefaultSessionCookie is the sign-in gateways' session cookie when
// sdk.session.cookie_name (or its older name sdk.saml.cookie_name) is not
// set.
const DefaultSessionCookie = "svc_session"

// clientSettings are the keys of the file a client uses. Other keys belong
// to the sidecar and are not the client's to check.
type clientSettings struct {
	SDK struct {
		SidecarAddr string `toml:"sidecar_addr"`
		FailMode    string `toml:"fail_mode"`
		Session     struct {
			CookieName string `toml:"cookie_name"`
		} `toml:"session"`
		SAML *struct {
			CookieName string `toml:"cookie_name"`
			ACSURL     string `toml:"acs_url"`
		} `toml:"saml"`
		OIDC *struct {
			IssuerURL   string `toml:"issuer_url"`
			RedirectURL string `toml:"redirect_url"`
			Providers   []struct {
				RedirectURL string `toml:"redirect_url"`
			} `toml:"providers"`
		} `toml:"oidc"`
	} `toml:"sdk"`
}

// clientConfig is what a client takes from its options, the environment
// and the file.
type clientConfig struct {
	addr, mode string
	// cookie is the sign-in gateways' session cookie, "" when the
	// deployment has no gateway.
	cookie string
	// prefixedOnly: the gateways' public URLs (sdk.saml.acs_url, the
	// OpenID Connect redirect_url of each provider) are known and their
	// cookies are all prefixed, so an unprefixed session cookie is never
	// read (wire.SessionCookieFrom).
	prefixedOnly bool
}

// clientDefaults fills addr and mode when empty: SVC_SIDECAR_ADDR and
// SVC_FAIL_MODE first, then sdk.sidecar_addr and sdk.fail_mode of file
// (none when "" or missing), then the defaults ("[::1]:50051", open).
//
// The session cookie is SVC_SESSION_COOKIE_NAME, else
// SVC_SAML_COOKIE_NAME, else, when the deployment has a sign-in gateway,
// sdk.session.cookie_name, else sdk.saml.cookie_name, else
// DefaultSessionCookie; none without a gateway. The deployment has a
// SAML gateway with an [sdk.saml] table or SVC_SAML_ENTITY_ID (which the
// sidecar needs for one), an OpenID Connect one with SVC_OIDC_ISSUER_URL,
// sdk.oidc.issuer_url or a [[sdk.oidc.providers]] entry.
//
// Only the prefixed session cookie is read when the gateways' public URLs
// are known and each is one whose cookies the gateway prefixes
// (wire.PrefixesCookies), the sidecar's rule: the SAML ACS URL,
// SVC_SAML_ACS_URL else sdk.saml.acs_url, and the redirect_url of each
// OpenID Connect provider, SVC_OIDC_REDIRECT_URL else
// sdk.oidc.redirect_url for [sdk.oidc]'s own, which is also the default
// of each [[sdk.oidc.providers]] entry.
func clientDefaults(addr, mode string, lookupEnv func(string) (string, bool), file string) (clientConfig, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	env := func(name string) string { v, _ := lookupEnv(name); return v }
	if addr == "" {
		addr = env("SVC_SIDECAR_ADDR")
	}
	if mode == "" {
		mode = env("SVC_FAIL_MODE")
	}
	cookie, cookieKey := env("SVC_SESSION_COOKIE_NAME"), "sdk.session.cookie_name"
	if cookie == "" {
		cookie, cookieKey = env("SVC_SAML_COOKIE_NAME"), "sdk.saml.cookie_name"
	}
	_, samlGateway := lookupEnv("SVC_SAML_ENTITY_ID")
	issuer, acs, redirect := env("SVC_OIDC_ISSUER_URL"), env("SVC_SAML_ACS_URL"), env("SVC_OIDC_REDIRECT_URL")
	var s clientSettings
	if file != "" {
		data, err := os.ReadFile(file)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return clientConfig{}, fmt.Errorf("%s: %w", file, err)
		default:
			if err := toml.Unmarshal(data, &s); err != nil {
				return clientConfig{}, fmt.Errorf("%s: %w", file, err)
			}
		}
	}
	if addr == "" {
		addr = s.SDK.SidecarAddr
	}
	if mode == "" {
		mode = s.SDK.FailMode
	}
	if sp := s.SDK.SAML; sp != nil {
		samlGateway = true
		if acs == "" {
			acs = sp.ACSURL
		}
	}
	var providers []string // redirect_url of each [[sdk.oidc.providers]] entry
	if o := s.SDK.OIDC; o != nil {
		if issuer == "" {
			issuer = o.IssuerURL
		}
		if redirect == "" {
			redirect = o.RedirectURL
		}
		for _, p := range o.Providers {
			providers = append(providers, p.RedirectURL)
		}
	}
	oidcGateway := issuer != "" || len(providers) > 0
	if cookie == "" && (samlGateway || oidcGateway) {
		cookie, cookieKey = s.SDK.Session.CookieName, "sdk.session.cookie_name"
		if cookie == "" && s.SDK.SAML != nil {
			cookie, cookieKey = s.SDK.SAML.CookieName, "sdk.saml.cookie_name"
		}
		if cookie == "" {
			cookie = DefaultSessionCookie
		}
	}
	if addr == "" {
		addr = DefaultSidecarAddr
	}
	if cookie != "" {
		if p := wire.SAMLCookieNameProblem(cookie); p != "" {
			return clientConfig{}, fmt.Errorf("%s %s", cookieKey, p)
		}
	}
	urls := []string{acs}
	if issuer != "" {
		urls = append(urls, redirect)
	}
	for _, p := range providers {
		if p == "" {
			p = redirect
		}
		urls = append(urls, p)
	}
	return clientConfig{addr: addr, mode: mode, cookie: cookie, prefixedOnly: prefixesCookies(urls)}, nil
}

// prefixesCookies reports whether the gateways whose public URLs are urls
// all prefix their cookies: at least one is known, and each known one is
// (wire.PrefixesCookies). An empty URL is one the client does not know
// (the sidecar refuses a gateway without it) and is passed over.
func prefixesCookies(urls []string) bool {
	known := false
	for _, u := range urls {
		if u == "" {
			continue
		}
		if !wire.PrefixesCookies(u) {
			return false
		}
		known = true
	}
	return known
}
