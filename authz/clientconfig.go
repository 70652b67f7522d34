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
// fail_mode, and sdk.saml.cookie_name, as the sidecar and the other SDKs
// do.
const DefaultConfigFile = "svc.toml"

// DefaultSessionCookie is the SAML gateway's session cookie when
// sdk.saml.cookie_name is not set.
const DefaultSessionCookie = "svc_session"

// clientSettings are the keys of the file a client uses. Other keys belong
// to the sidecar and are not the client's to check.
type clientSettings struct {
	SDK struct {
		SidecarAddr string `toml:"sidecar_addr"`
		FailMode    string `toml:"fail_mode"`
		SAML        *struct {
			CookieName string `toml:"cookie_name"`
			ACSURL     string `toml:"acs_url"`
		} `toml:"saml"`
	} `toml:"sdk"`
}

// clientConfig is what a client takes from its options, the environment
// and the file.
type clientConfig struct {
	addr, mode string
	// cookie is the SAML gateway's session cookie, "" when the deployment
	// has no gateway.
	cookie string
	// prefixedOnly: the gateway's public URL (sdk.saml.acs_url) is known
	// and its cookies are all prefixed, so an unprefixed session cookie
	// is never read (wire.SessionCookieFrom).
	prefixedOnly bool
}

// clientDefaults fills addr and mode when empty: SVC_SIDECAR_ADDR and
// SVC_FAIL_MODE first, then sdk.sidecar_addr and sdk.fail_mode of file
// (none when "" or missing), then the defaults ("[::1]:50051", open). The
// session cookie is SVC_SAML_COOKIE_NAME, else sdk.saml.cookie_name, else
// DefaultSessionCookie when the deployment has a SAML gateway (an
// [sdk.saml] table, or SVC_SAML_ENTITY_ID, which the sidecar needs for
// one), else none. Only the prefixed session cookie is read when the
// gateway's ACS URL, SVC_SAML_ACS_URL else sdk.saml.acs_url, is one
// whose cookies the gateway prefixes (wire.PrefixesCookies).
func clientDefaults(addr, mode string, lookupEnv func(string) (string, bool), file string) (clientConfig, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if addr == "" {
		addr, _ = lookupEnv("SVC_SIDECAR_ADDR")
	}
	if mode == "" {
		mode, _ = lookupEnv("SVC_FAIL_MODE")
	}
	cookie, cookieSet := lookupEnv("SVC_SAML_COOKIE_NAME")
	if _, ok := lookupEnv("SVC_SAML_ENTITY_ID"); ok && !cookieSet {
		cookie = DefaultSessionCookie
	}
	acs, _ := lookupEnv("SVC_SAML_ACS_URL")
	if file != "" {
		data, err := os.ReadFile(file)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return clientConfig{}, fmt.Errorf("%s: %w", file, err)
		default:
			var s clientSettings
			if err := toml.Unmarshal(data, &s); err != nil {
				return clientConfig{}, fmt.Errorf("%s: %w", file, err)
			}
			if addr == "" {
				addr = s.SDK.SidecarAddr
			}
			if mode == "" {
				mode = s.SDK.FailMode
			}
			if s.SDK.SAML != nil && !cookieSet {
				cookie = s.SDK.SAML.CookieName
				if cookie == "" {
					cookie = DefaultSessionCookie
				}
			}
			if s.SDK.SAML != nil && acs == "" {
				acs = s.SDK.SAML.ACSURL
			}
		}
	}
	if addr == "" {
		addr = DefaultSidecarAddr
	}
	if cookie != "" {
		if p := wire.SAMLCookieNameProblem(cookie); p != "" {
			return clientConfig{}, fmt.Errorf("sdk.saml.cookie_name %s", p)
		}
	}
	return clientConfig{addr: addr, mode: mode, cookie: cookie, prefixedOnly: acs != "" && wire.PrefixesCookies(acs)}, nil
}
