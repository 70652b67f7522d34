package e2e

import (
	"encoding/base64"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// hostCookieSite is a sidecar whose SAML gateway is served on an https
// origin (a TLS-terminating proxy in front of the gateway's listener), so
// that its cookies are Secure and so "__Host-" prefixed.
type hostCookieSite struct {
	s              *harness.Sidecar
	idp            *testidp.IdP
	front          *httptest.Server
	acs, entityID  string
	frontURL       *url.URL
	frontTransport http.RoundTripper
}

func startHostCookieSite(t *testing.T) hostCookieSite {
	t.Helper()
	idp := generateIdP(t, "https://idp.example.test/saml", "https://idp.example.test/saml/sso")
	samlAddr := harness.FreeAddr(t)
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: samlAddr}))
	t.Cleanup(front.Close)
	site := hostCookieSite{idp: idp, front: front, acs: front.URL + "/auth/saml/acs", entityID: front.URL + "/auth/saml/metadata",
		frontTransport: front.Client().Transport}
	site.frontURL, _ = url.Parse(front.URL)
	site.s = startSidecar(t, newKeyring(t), map[string]string{
		"SVC_SAML_ADDR":              samlAddr,
		"SVC_SAML_ENTITY_ID":         site.entityID,
		"SVC_SAML_ACS_URL":           site.acs,
		"SVC_SAML_IDP_METADATA_FILE": harness.WriteFile(t, t.TempDir(), "idp.xml", string(idp.Metadata())),
	})
	return site
}

// browser is a client of the https origin with a cookie jar of its own
// that does not follow redirects.
func (h hostCookieSite) browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: h.frontTransport, Jar: jar, Timeout: rpcTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// login starts a sign-on from browser and returns the AuthnRequest id and
// the login's answer.
func (h hostCookieSite) login(t *testing.T, browser *http.Client) (string, *http.Response) {
	t.Helper()
	resp, err := browser.Get(h.front.URL + "/auth/saml/login?return_to=%2Forders%2F1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("login: %d, want 302", resp.StatusCode)
	}
	return requestIDOf(t, resp.Header.Get("Location")), resp
}

// answer is the IdP's signed answer for user to the request id.
func (h hostCookieSite) answer(t *testing.T, user, inResponseTo string) string {
	t.Helper()
	doc, err := h.idp.Sign(testidp.Response{
		Destination: h.acs, Recipient: h.acs, Audience: h.entityID, NameID: user, InResponseTo: inResponseTo,
		Attributes: []testidp.Attribute{{Name: "role", Values: []string{"viewer"}}, {Name: "tenant_id", Values: []string{harness.DefaultTenant}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(doc)
}

// post posts an answer to the ACS from browser, with extra cookies in the
// Cookie header next to those of its jar (what a sibling subdomain
// planted for the parent domain).
func (h hostCookieSite) post(t *testing.T, browser *http.Client, samlResponse, planted string) *http.Response {
	t.Helper()
	form := url.Values{"SAMLResponse": {samlResponse}, "RelayState": {"/orders/1"}}
	req, _ := http.NewRequest(http.MethodPost, h.acs, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if planted != "" {
		req.Header.Set("Cookie", planted)
	}
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// signIn completes an SP-initiated sign-on for user in browser and returns
// the session cookie the gateway set.
func (h hostCookieSite) signIn(t *testing.T, browser *http.Client, user string) *http.Cookie {
	t.Helper()
	id, _ := h.login(t, browser)
	resp := h.post(t, browser, h.answer(t, user, id), "")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in of %s: %d %q, want 303", user, resp.StatusCode, refusalCode(t, resp))
	}
	for _, c := range resp.Cookies() {
		if c.Name == "__Host-svc_session" && c.Value != "" {
			return c
		}
	}
	t.Fatalf("sign-in of %s set no __Host-svc_session: %q", user, resp.Header.Values("Set-Cookie"))
	return nil
}

// checkHostPrefixed fails unless c is a cookie a browser keeps under the
// __Host- prefix: Secure, Path=/, no Domain.
func checkHostPrefixed(t *testing.T, c *http.Cookie) {
	t.Helper()
	if !strings.HasPrefix(c.Name, "__Host-") || !c.Secure || c.Path != "/" || c.Domain != "" || !c.HttpOnly {
		t.Errorf("Set-Cookie %q: want a __Host- name, Secure, HttpOnly, Path=/ and no Domain", c.Raw)
	}
}

// Cookie tossing against the real binary behind an https origin. A
// sibling subdomain (evil.example.test next to app.example.test) can set
// cookies for the parent domain, but none named __Host-: the gateway now
// names every cookie it sets that way, so the attacker's unprefixed
// svc_session (their own valid session, planted to sign the victim in as
// them) does not displace the victim's session at the check, and their
// unprefixed svc_session_req (listing a sign-on they started) does not
// bind their IdP answer to the victim's browser at the ACS (login CSRF).
func TestHostCookieAttacks(t *testing.T) {
	t.Parallel()
	site := startHostCookieSite(t)
	victim, attacker := site.browser(t), site.browser(t)

	// The cookies the gateway sets are __Host- prefixed.
	_, loginResp := site.login(t, victim)
	var reqCookies []*http.Cookie
	for _, c := range loginResp.Cookies() {
		reqCookies = append(reqCookies, c)
		checkHostPrefixed(t, c)
	}
	if len(reqCookies) != 1 || reqCookies[0].Name != "__Host-svc_session_req" || reqCookies[0].SameSite != http.SameSiteNoneMode {
		t.Fatalf("login Set-Cookie %q, want __Host-svc_session_req alone, SameSite=None", loginResp.Header.Values("Set-Cookie"))
	}
	victimSession := site.signIn(t, victim, "victim@example.test")
	checkHostPrefixed(t, victimSession)
	if victimSession.SameSite != http.SameSiteLaxMode {
		t.Errorf("session Set-Cookie %q: want SameSite=Lax", victimSession.Raw)
	}
	malloryToken := site.signIn(t, attacker, "mallory@example.test").Value

	check := func(cookie string) checkResult {
		t.Helper()
		return envoyCheckHeaders(t, site.s, http.MethodGet, "/orders/1", map[string]string{"cookie": cookie}, nil)
	}

	t.Run("a tossed session cookie does not displace the victim's", func(t *testing.T) {
		// The attacker's token is a valid session: as the prefixed cookie
		// it is mallory's. Only the cookie's name differs below.
		if r := check("__Host-svc_session=" + malloryToken); r.status != http.StatusOK || r.headers["x-svc-user-id"] != "mallory@example.test" {
			t.Fatalf("mallory's own session: %d %v, want 200 as mallory", r.status, r.headers)
		}
		// A browser sends the cookie of the longer path first: the tossed
		// one, planted with Path=/orders, comes before the victim's.
		for _, cookie := range []string{
			"svc_session=" + malloryToken + "; __Host-svc_session=" + victimSession.Value,
			"__Host-svc_session=" + victimSession.Value + "; svc_session=" + malloryToken,
		} {
			r := check(cookie)
			if r.status != http.StatusOK || r.headers["x-svc-user-id"] != "victim@example.test" {
				t.Errorf("victim's browser with a tossed svc_session: %d %v %s, want 200 as the victim", r.status, r.headers, r.body)
			}
		}
		// Nor does it sign in a browser that has no session of its own
		// (never signed in, signed out, expired): behind this Secure
		// gateway an unprefixed session cookie is only ever a tossed one.
		if r := check("svc_session=" + malloryToken); r.status != http.StatusUnauthorized || parseDeny(t, r.body).Reason != "token-missing" {
			t.Errorf("a browser with a tossed svc_session alone: %d %v %s, want 401 token-missing", r.status, r.headers, r.body)
		}
		// Nor does it stand in for a victim's session that is no longer
		// good.
		r := check("svc_session=" + malloryToken + "; __Host-svc_session=" + victimSession.Value[:len(victimSession.Value)-4] + "AAAA")
		if r.status != http.StatusUnauthorized || parseDeny(t, r.body).Reason != "signature-invalid" {
			t.Errorf("tossed svc_session next to a broken __Host- one: %d %s, want 401 signature-invalid", r.status, r.body)
		}
	})

	t.Run("a tossed request cookie does not bind the attacker's answer", func(t *testing.T) {
		for _, victimPending := range []bool{false, true} {
			target := site.browser(t)
			if victimPending {
				site.login(t, target) // the victim's own __Host-svc_session_req
			}
			// The attacker starts a sign-on, signs in at the IdP as
			// themselves, and tosses svc_session_req=<their request id>
			// to the victim; their page auto-posts the IdP's answer.
			id, _ := site.login(t, attacker)
			resp := site.post(t, target, site.answer(t, "mallory@example.test", id), "svc_session_req="+id)
			if code := refusalCode(t, resp); resp.StatusCode != http.StatusUnauthorized || code != "saml-request-not-bound" {
				t.Fatalf("attacker's answer with a tossed svc_session_req (victim pending %v): %d %q, want 401 saml-request-not-bound",
					victimPending, resp.StatusCode, code)
			}
			for _, c := range resp.Cookies() {
				if strings.Contains(c.Name, "svc_session") && !strings.HasSuffix(c.Name, "_req") {
					t.Errorf("the refusal set a session cookie: %q", c.Raw)
				}
			}
		}
		// The binding is what stops it: the same kind of answer posted
		// from the browser that holds the __Host- request cookie signs in.
		id, _ := site.login(t, attacker)
		if resp := site.post(t, attacker, site.answer(t, "mallory@example.test", id), ""); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("answer from the browser that started the sign-on: %d %q, want 303", resp.StatusCode, refusalCode(t, resp))
		}
	})

	t.Run("logout clears the prefixed and the plain session cookie", func(t *testing.T) {
		resp, err := victim.Get(site.front.URL + "/auth/saml/logout")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cleared := map[string]bool{}
		for _, c := range resp.Cookies() {
			if c.MaxAge < 0 && c.Value == "" && c.Path == "/" && c.Domain == "" {
				cleared[c.Name] = true
			}
		}
		if !cleared["__Host-svc_session"] || !cleared["svc_session"] {
			t.Errorf("logout Set-Cookie %q, want __Host-svc_session and svc_session cleared", resp.Header.Values("Set-Cookie"))
		}
		for _, c := range victim.Jar.Cookies(site.frontURL) {
			if c.Name == "__Host-svc_session" {
				t.Errorf("the browser keeps its session after logout")
			}
		}
	})
}
