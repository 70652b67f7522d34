package wire_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svc-dev/svc/wire"
)

// TestValidCookieName: the session cookie's name is a plain token of
// letters, digits, '-', '_' and '.', nothing a Cookie header would split
// or a browser would refuse.
func TestValidCookieName(t *testing.T) {
	for name, want := range map[string]bool{
		"svc_session": true, "Session-1.v2": true, "__Host-x": true, "x": true,
		"": false, "a b": false, "a;b": false, "a=b": false, "a,b": false, `a"b`: false,
		"sessión": false, "a\tb": false, "a/b": false,
	} {
		if got := wire.ValidCookieName(name); got != want {
			t.Errorf("ValidCookieName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestPrefixedCookieName: a configured session cookie name may not carry
// the prefix the gateway adds itself, in any case.
func TestPrefixedCookieName(t *testing.T) {
	for name, want := range map[string]bool{
		"__Host-x": true, "__host-x": true, "__HOST-": true, "__Secure-x": true, "__secure-s": true,
		"svc_session": false, "__Hos": false, "__Hostx": false, "_Host-x": false, "x__Host-": false, "": false,
	} {
		if got := wire.PrefixedCookieName(name); got != want {
			t.Errorf("PrefixedCookieName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestSAMLCookieNameProblem: a name is refused for its characters first,
// then for a prefix the gateway adds itself; a good name has no problem.
func TestSAMLCookieNameProblem(t *testing.T) {
	for name, want := range map[string]string{
		"svc_session": "",
		"a b":         "must be a cookie name",
		"":            "must be a cookie name",
		"__Host-x":    "must not start with __Host- or __Secure-",
		"__secure-s":  "must not start with __Host- or __Secure-",
	} {
		got := wire.SAMLCookieNameProblem(name)
		if (want == "") != (got == "") || !strings.HasPrefix(got, want) || (got != "" && !strings.Contains(got, fmt.Sprintf("%q", name))) {
			t.Errorf("SAMLCookieNameProblem(%q) = %q, want one starting %q and naming it", name, got, want)
		}
	}
}

func TestPrefixesCookies(t *testing.T) {
	for raw, want := range map[string]bool{
		"https://app.example.com/auth/saml/acs": true,
		"https://127.0.0.1/acs":                 true,
		"http://app.example.com/acs":            true,
		"http://127.0.0.1:8080/acs":             false,
		"http://127.1.2.3/acs":                  false,
		"http://LOCALHOST:8080/acs":             false,
		"http://[::1]:8080/acs":                 false,
		"http://[::2]:8080/acs":                 true,
		"::not a url":                           true,
	} {
		if got := wire.PrefixesCookies(raw); got != want {
			t.Errorf("PrefixesCookies(%q) = %v, want %v", raw, got, want)
		}
	}
}

// TestSessionCookieFrom: with prefixedOnly, an unprefixed session cookie
// is never the session, wherever it stands; without, it is read when no
// prefixed one is there.
func TestSessionCookieFrom(t *testing.T) {
	tests := []struct {
		cookie   string
		prefixed bool
		want     string
	}{
		{"svc_session=tossed", true, ""},
		{"svc_session=tossed", false, "tossed"},
		{"svc_session=tossed; __Host-svc_session=mine", true, "mine"},
		{"__Host-svc_session=mine; svc_session=tossed", false, "mine"},
		{"other=x", true, ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Cookie", tt.cookie)
		if got, _ := wire.SessionCookieFrom(r, "svc_session", tt.prefixed); got != tt.want {
			t.Errorf("SessionCookieFrom(%q, prefixedOnly %v) = %q, want %q", tt.cookie, tt.prefixed, got, tt.want)
		}
	}
}
