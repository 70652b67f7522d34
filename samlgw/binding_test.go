package samlgw_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// otherBrowser is f seen from another browser: same gateway, own cookies.
func otherBrowser(t *testing.T, f *fixture) *fixture {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := *f
	b.jar = jar
	return &b
}

// requestCookie returns the request cookie in h's Set-Cookie, or nil.
func requestCookie(h http.Header, name string) *http.Cookie {
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Login CSRF: an attacker starts a sign-on with their own account and has
// a victim's browser post the IdP's answer to the ACS. The answer names a
// request of this gateway, but not one the victim's browser started: it
// is refused, with or without a pending sign-on of the victim's own, as
// a browser form or as a JSON client, and no session cookie is set.
func TestLoginCSRFRefused(t *testing.T) {
	f := newFixture(t)
	attacker := otherBrowser(t, f)
	for _, tc := range []struct {
		name       string
		pending    bool // the victim has started a sign-on of their own
		jsonClient bool
	}{{"browser", false, false}, {"browser with its own sign-on pending", true, false}, {"JSON client", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			victim := otherBrowser(t, f)
			if tc.pending {
				victim.answering(t)
			}
			r := attacker.answering(t)
			r.NameID = "mallory@example.com"
			doc := signed(t, r)
			a := victim.post(t, doc, tc.jsonClient)
			if a.status != http.StatusUnauthorized || a.code != string(reason.SAMLRequestNotBound) {
				t.Fatalf("attacker's response posted by the victim: %d %q %s, want 401 %q", a.status, a.code, a.message, reason.SAMLRequestNotBound)
			}
			if a.token != "" || requestCookie(a.header, "svc_session") != nil {
				t.Errorf("refusal carries a token or a session cookie: %v", a.header)
			}
			if !strings.Contains(a.message, "/auth/saml/login") {
				t.Errorf("message %q does not say where to start again", a.message)
			}
			// The response is spent: not even its own browser can use it now.
			if a := attacker.post(t, doc, true); a.status != http.StatusUnauthorized || a.code != string(reason.SAMLReplayed) {
				t.Errorf("the refused response in the attacker's browser: %d %q, want 401 %q", a.status, a.code, reason.SAMLReplayed)
			}
		})
	}
	// The browser that started the sign-on completes it.
	if a := attacker.post(t, signed(t, attacker.answering(t)), false); a.status != http.StatusSeeOther {
		t.Fatalf("the browser that started the sign-on: %d %q %s, want 303", a.status, a.code, a.message)
	}
}

// The request cookie: named after cookie_name, HttpOnly, SameSite=None
// (the IdP's POST is cross-site) and so Secure, also for plain http on
// loopback; it lives as long as a request. Where the gateway's cookies
// are Secure it is "__Host-" prefixed with Path=/ and no Domain, as the
// prefix requires; on plain http on loopback it keeps its plain name
// under the path prefix.
func TestRequestCookieAttributes(t *testing.T) {
	for _, tc := range []struct {
		acs, cookieName, prefix string
		wantName, wantPath      string
	}{
		{"https://app.example.com/auth/saml/acs", "", "", "__Host-svc_session_req", "/"},
		{"https://app.example.com/sso/acs", "app_sess", "/sso", "__Host-app_sess_req", "/"},
		{"http://127.0.0.1:7701/sso/acs", "app_sess", "/sso", "app_sess_req", "/sso"},
	} {
		t.Run(tc.acs, func(t *testing.T) {
			f := newFixture(t, withSAML(func(s *config.SAML) {
				s.ACSURL = tc.acs
				if tc.cookieName != "" {
					s.CookieName, s.PathPrefix = tc.cookieName, tc.prefix
				}
			}))
			prefix := "/auth/saml"
			if tc.cookieName != "" {
				prefix = tc.prefix
			}
			resp, err := f.client().Get(f.srv.URL + prefix + "/login")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			c := requestCookie(resp.Header, tc.wantName)
			if resp.StatusCode != http.StatusFound || c == nil || len(resp.Header.Values("Set-Cookie")) != 1 {
				t.Fatalf("login: %d Set-Cookie %q, want 302 with %s alone", resp.StatusCode, resp.Header.Values("Set-Cookie"), tc.wantName)
			}
			if !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteNoneMode || c.Path != tc.wantPath || c.Domain != "" ||
				c.MaxAge != 600 || !strings.HasPrefix(c.Value, "id-") {
				t.Errorf("Set-Cookie %q: want HttpOnly; Secure; SameSite=None; Path=%s; Max-Age=600, no Domain and the request id", c.Raw, tc.wantPath)
			}
		})
	}
}

// Login CSRF through a sibling subdomain: the attacker cannot set the
// "__Host-" request cookie on the victim's browser, but can toss an
// unprefixed svc_session_req listing the attacker's own pending request
// for the parent domain. Where the gateway's cookies are prefixed the ACS
// does not take it, alone or next to the victim's own prefixed cookie; on
// plain http on loopback the unprefixed cookie is the request cookie.
func TestTossedRequestCookieRefused(t *testing.T) {
	post := func(t *testing.T, f *fixture, r testidp.Response, cookie string) answer {
		t.Helper()
		form := url.Values{"SAMLResponse": {b64(signed(t, r))}, "RelayState": {"/"}}
		req := f.acsRequest(t, form.Encode(), "application/json")
		req.Header.Set("Cookie", cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return answer{status: resp.StatusCode, code: body.Error, header: resp.Header}
	}
	f := newFixture(t)
	for _, tc := range []struct{ name, cookie string }{
		{"tossed cookie alone", "svc_session_req=%[1]s"},
		{"tossed cookie before the victim's own", "svc_session_req=%[1]s; __Host-svc_session_req=%[2]s"},
		{"tossed cookie after the victim's own", "__Host-svc_session_req=%[2]s; svc_session_req=%[1]s"},
		{"prefix in another case", "__host-svc_session_req=%[1]s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attacker, victim := otherBrowser(t, f).answering(t), otherBrowser(t, f).answering(t)
			attacker.NameID = "mallory@example.com"
			a := post(t, f, attacker, fmt.Sprintf(tc.cookie, attacker.InResponseTo, victim.InResponseTo))
			if a.status != http.StatusUnauthorized || a.code != string(reason.SAMLRequestNotBound) {
				t.Fatalf("attacker's answer with Cookie %q: %d %q, want 401 %q", tc.cookie, a.status, a.code, reason.SAMLRequestNotBound)
			}
		})
	}
	// The prefixed cookie is the one that binds: the same kind of answer
	// with it signs in.
	r := otherBrowser(t, f).answering(t)
	if a := post(t, f, r, "__Host-svc_session_req="+r.InResponseTo); a.status != http.StatusOK {
		t.Fatalf("answer with the __Host- request cookie: %d %q, want 200", a.status, a.code)
	}
	// On plain http on loopback the unprefixed name is the request cookie.
	const loopACS = "http://127.0.0.1:7701/auth/saml/acs"
	lf := newFixture(t, withSAML(func(s *config.SAML) { s.ACSURL = loopACS }))
	r = otherBrowser(t, lf).answering(t)
	r.Destination, r.Recipient = loopACS, loopACS
	if a := post(t, lf, r, "svc_session_req="+r.InResponseTo); a.status != http.StatusOK {
		t.Fatalf("answer with the request cookie on loopback: %d %q, want 200", a.status, a.code)
	}
}

// One browser may have several sign-ons pending (two tabs, a login
// clicked twice): the cookie keeps the last four. The ACS removes the one
// it answered, and clears the cookie with the last.
func TestSeveralPendingSignOns(t *testing.T) {
	f := newFixture(t)
	first, second := f.answering(t), f.answering(t)
	a := f.post(t, signed(t, first), false)
	if a.status != http.StatusSeeOther {
		t.Fatalf("answer to the first of two: %d %q %s", a.status, a.code, a.message)
	}
	if c := requestCookie(a.header, "__Host-svc_session_req"); c == nil || c.Value != second.InResponseTo || c.MaxAge != 600 {
		t.Errorf("after the first answer Set-Cookie %q, want the second request alone", a.header.Values("Set-Cookie"))
	}
	a = f.post(t, signed(t, second), true)
	if a.status != http.StatusOK {
		t.Fatalf("answer to the second: %d %q %s", a.status, a.code, a.message)
	}
	if c := requestCookie(a.header, "__Host-svc_session_req"); c == nil || c.Value != "" || c.MaxAge >= 0 || c.Path != "/" {
		t.Errorf("after the last answer Set-Cookie %q, want the request cookie cleared", a.header.Values("Set-Cookie"))
	}
	if got := f.jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(f.srv.URL, "http://"), Path: "/auth/saml/acs"}); len(got) != 1 || got[0].Name != "__Host-svc_session" {
		t.Errorf("the browser keeps %v, want the session cookie alone", got)
	}

	// Past four, the oldest pending sign-on is forgotten.
	oldest := f.answering(t)
	var last []string
	for range 4 {
		last = append(last, f.answering(t).InResponseTo)
	}
	if a := f.post(t, signed(t, oldest), true); a.code != string(reason.SAMLRequestNotBound) {
		t.Errorf("answer to the fifth newest sign-on: %d %q, want %q", a.status, a.code, reason.SAMLRequestNotBound)
	}
	r := valid()
	r.InResponseTo = last[0]
	if a := f.post(t, signed(t, r), true); a.status != http.StatusOK {
		t.Errorf("answer to the fourth newest sign-on: %d %q %s, want 200", a.status, a.code, a.message)
	}
}
