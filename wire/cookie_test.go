package wire_test

import (
	"fmt"
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
