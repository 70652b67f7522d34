package samlgw_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/config"
)

// The session cookie is Secure unless acs_url is plain http on a loopback
// host, at the ACS and at logout alike; where it is Secure it is named
// "__Host-svc_session", with Path=/ and no Domain as the prefix requires,
// and the ACS and logout clear the unprefixed name too.
func TestCookieSecureRule(t *testing.T) {
	tests := []struct {
		acs    string
		secure bool
	}{
		{"https://app.example.com/auth/saml/acs", true},
		{"http://app.example.com/auth/saml/acs", true},
		{"http://127.0.0.1:7701/auth/saml/acs", false},
		{"http://localhost:7701/auth/saml/acs", false},
		{"http://[::1]:7701/auth/saml/acs", false},
	}
	for _, tt := range tests {
		t.Run(tt.acs, func(t *testing.T) {
			f := newFixture(t, withSAML(func(s *config.SAML) { s.ACSURL, s.AllowIDPInitiated = tt.acs, true }))
			r := valid()
			r.Destination, r.Recipient = tt.acs, tt.acs
			a := f.post(t, signed(t, r), false)
			if a.status != http.StatusSeeOther {
				t.Fatalf("ACS: %d %q %s", a.status, a.code, a.message)
			}
			logout, err := http.NewRequest(http.MethodPost, f.srv.URL+"/auth/saml/logout", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(logout)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := []string{"svc_session"}
			if tt.secure {
				want = []string{"__Host-svc_session", "svc_session"}
			}
			for where, h := range map[string]http.Header{"acs": a.header, "logout": resp.Header} {
				cs := (&http.Response{Header: h}).Cookies()
				var got []string
				for _, c := range cs {
					got = append(got, c.Name)
				}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("%s: cookies %q, want %q", where, h.Values("Set-Cookie"), want)
				}
				for _, c := range cs {
					if c.Secure != tt.secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Domain != "" {
						t.Errorf("%s: Set-Cookie %q: Secure=%v HttpOnly=%v SameSite=%v Path=%q Domain=%q, want Secure=%v HttpOnly Lax, Path / and no Domain",
							where, c.Raw, c.Secure, c.HttpOnly, c.SameSite, c.Path, c.Domain, tt.secure)
					}
					if clears := c.MaxAge < 0 && c.Value == ""; clears != (where == "logout" || c.Name != want[0]) {
						t.Errorf("%s: Set-Cookie %q: clears the cookie %v, want the session set at the ACS and every other cookie cleared", where, c.Raw, clears)
					}
				}
			}
		})
	}
}

// A sign-in where the session cookie is prefixed also clears a session
// cookie of the unprefixed name (one from before the prefix): the new
// session is the prefixed one alone. The IdP's cross-site POST does not
// carry that SameSite=Lax cookie, so it is cleared whether or not the
// request shows it. Where the cookie is not prefixed there is nothing to
// clear.
func TestACSClearsTheUnprefixedSessionCookie(t *testing.T) {
	for _, tc := range []struct {
		acs        string
		wantClears bool
	}{
		{"https://app.example.com/auth/saml/acs", true},
		{"http://127.0.0.1:7701/auth/saml/acs", false},
	} {
		t.Run(tc.acs, func(t *testing.T) {
			f := newFixture(t, withSAML(func(s *config.SAML) { s.ACSURL, s.AllowIDPInitiated = tc.acs, true }))
			r := valid()
			r.Destination, r.Recipient = tc.acs, tc.acs
			a := f.post(t, signed(t, r), false)
			var cleared, set bool
			for _, c := range (&http.Response{Header: a.header}).Cookies() {
				switch {
				case c.Name == "svc_session" && c.MaxAge < 0 && c.Value == "" && c.Path == "/":
					cleared = true
				case c.Name == "svc_session" || c.Name == "__Host-svc_session":
					set = c.Value != ""
				}
			}
			if a.status != http.StatusSeeOther || !set || cleared != tc.wantClears {
				t.Errorf("ACS: %d Set-Cookie %q: new session %v, unprefixed one cleared %v, want 303, a session, cleared %v",
					a.status, a.header.Values("Set-Cookie"), set, cleared, tc.wantClears)
			}
		})
	}
}
