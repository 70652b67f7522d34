package samlgw_test

import (
	"net/http"
	"testing"
)

// The return_to path travels to the IdP as RelayState whole: a query of
// several parameters survives (the browser lands on the page it asked
// for), and nothing in it becomes a parameter of the sign-on redirect.
func TestLoginRelayStateIsOneEscapedParameter(t *testing.T) {
	f := newFixture(t)
	for _, returnTo := range []string{
		"/orders?page=2&sort=date",
		"/orders?x=1&RelayState=/evil&SAMLRequest=forged",
		"/search?q=a%26b+c&lang=en",
		"/",
	} {
		_, loc, status := f.login(t, returnTo)
		if status != http.StatusFound {
			t.Fatalf("login %q: %d", returnTo, status)
		}
		q := loc.Query()
		if got := q["RelayState"]; len(got) != 1 || got[0] != returnTo {
			t.Errorf("return_to %q reached the IdP as RelayState %q", returnTo, got)
		}
		if n := len(q["SAMLRequest"]); n != 1 {
			t.Errorf("return_to %q: %d SAMLRequest parameters in %s", returnTo, n, loc)
		}
		for k := range q {
			if k != "SAMLRequest" && k != "RelayState" && k != "SigAlg" && k != "Signature" {
				t.Errorf("return_to %q added the parameter %q to the sign-on redirect %s", returnTo, k, loc)
			}
		}
	}
}
