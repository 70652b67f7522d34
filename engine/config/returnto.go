package config

import (
	"net/url"
	"strings"
)

// MaxReturnToLen bounds a return_to path.
const MaxReturnToLen = 2048

// ReturnToPath checks a return_to (or RelayState, or default_return_to):
// a same-origin relative path such as "/app?x=1", never a URL that a
// browser would resolve to another origin ("//host", "/\host", a scheme),
// nor one with control characters or a backslash, at most MaxReturnToLen
// bytes. "" is accepted as is (the caller's default applies). The SAML
// gateway, the proxy path's login redirect and configuration validation
// share this one rule.
func ReturnToPath(s string) (string, bool) {
	if s == "" {
		return "", true
	}
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.HasPrefix(s, "/\\") || len(s) > MaxReturnToLen {
		return "", false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return "", false
		}
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "", false
	}
	return s, true
}
