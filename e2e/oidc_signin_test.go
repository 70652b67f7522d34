package e2e

import (
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

// TestOIDCSignInThroughShippedProxies runs the sidecar binary with
// [sdk.oidc] against the real OpenID provider (npm oidc-provider) behind
// the shipped nginx.conf and Caddyfile: a browser without a session goes
// to the provider and comes back to its page signed in, through the
// proxy; a forged state, a replayed code and a return_to to another
// origin are refused with their reasons; logout at the provider reaches
// the sidecar by back-channel and ends the session.
func TestOIDCSignInThroughShippedProxies(t *testing.T) {
	t.Parallel()
	forEachOIDCSite(t, func(t *testing.T, site oidcSite) {
		base, front, idp := site.base, site.front, site.idp
		client := site.client
		b := newBrowser()
		follow := func(u string) (*http.Response, string, []string) {
			t.Helper()
			return followBrowser(t, b, u)
		}

		resp, body, seen := follow(base + "/orders/42?x=1")
		if resp.StatusCode != http.StatusOK || !strings.HasSuffix(seen[len(seen)-1], front+"/orders/42?x=1") {
			t.Fatalf("sign-in: %s after %v, want 200 at /orders/42?x=1", harness.Describe(resp.StatusCode, resp.Header, []byte(body)), seen)
		}
		if len(seen) < 4 || !strings.HasPrefix(seen[1], base+"/auth/oidc/login?return_to=") || !strings.HasPrefix(seen[2], idp.Issuer) {
			t.Errorf("the sign-in went %v, want the login, then the provider", seen)
		}
		echo := harness.ParseEcho(t, []byte(body))
		if got := strings.Join(echo.Headers["X-Svc-User-Id"], ","); got != client.ID {
			t.Errorf("the upstream saw user %q, want %q (headers %v)", got, client.ID, echo.Headers)
		}
		var code string
		for _, u := range seen {
			if strings.HasPrefix(u, base+"/auth/oidc/callback?") {
				p, _ := url.Parse(u)
				code = p.Query().Get("code")
			}
		}

		refused := func(name, u, want string) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodGet, u, nil)
			req.Header.Set("Accept", "application/json")
			resp, err := b.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := readBody(resp)
			resp.Body.Close()
			if !strings.Contains(body, `"error":"`+want+`"`) {
				t.Errorf("%s: %s, want %s", name, harness.Describe(resp.StatusCode, resp.Header, []byte(body)), want)
			}
		}
		// An attacker's own sign-in, stopped before its callback, and
		// followed by the victim: not this browser's state.
		// startLogin starts a sign-in in browser c and returns its state.
		startLogin := func(c *http.Client) string {
			t.Helper()
			resp, err := c.Get(base + "/auth/oidc/login")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			to, _ := url.Parse(resp.Header.Get("Location"))
			return to.Query().Get("state")
		}
		refused("forged state", base+"/auth/oidc/callback?code=x&state="+url.QueryEscape(startLogin(newBrowser())), "oidc-state-not-bound")
		// The code of the completed sign-in, on a fresh sign-in of this
		// browser: the provider spends a code once.
		refused("replayed code", base+"/auth/oidc/callback?code="+url.QueryEscape(code)+"&state="+url.QueryEscape(startLogin(b)), "oidc-code-refused")
		refused("return_to another origin", base+"/auth/oidc/login?return_to="+url.QueryEscape("//evil.example/x"), "oidc-bad-return-to")

		// Logout at the provider (RP-initiated) reaches the sidecar by
		// back-channel: the session, even replayed, is refused.
		var session string
		for _, c := range b.Jar.Cookies(&url.URL{Scheme: "http", Host: front, Path: "/"}) {
			if c.Name == "svc_session" {
				session = c.Value
			}
		}
		if session == "" {
			t.Fatal("no session cookie after the sign-in")
		}
		resp, body, seen = follow(base + "/auth/oidc/logout")
		xsrf := regexp.MustCompile(`name="xsrf" value="([^"]+)"`).FindStringSubmatch(body)
		if resp.StatusCode != http.StatusOK || xsrf == nil || !strings.HasPrefix(seen[len(seen)-1], idp.Issuer+"/session/end") {
			t.Fatalf("logout: %s after %v, want the provider's logout form", harness.Describe(resp.StatusCode, resp.Header, []byte(body)), seen)
		}
		cresp, err := b.PostForm(idp.Issuer+"/session/end/confirm", url.Values{"xsrf": {xsrf[1]}, "logout": {"yes"}})
		if err != nil {
			t.Fatal(err)
		}
		cresp.Body.Close()
		if cresp.StatusCode != http.StatusSeeOther {
			t.Fatalf("logout at the provider: %d, want 303", cresp.StatusCode)
		}
		testkit.EventuallyWithin(t, 5*time.Second, "the back-channel logout refuses the session", func() bool {
			req, _ := http.NewRequest(http.MethodGet, base+"/orders/42", nil)
			req.Header.Set("Accept", "application/json")
			req.Header.Set("Cookie", "svc_session="+session)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			body, _ := readBody(resp)
			resp.Body.Close()
			return resp.StatusCode == http.StatusUnauthorized && strings.Contains(body, `"reason":"oidc-session-revoked"`)
		})
	})
}

// forEachOIDCSite runs test in a subtest for each shipped proxy, on a
// site of its own from startOIDCSite; the sites share a keyring.
func forEachOIDCSite(t *testing.T, test func(t *testing.T, site oidcSite)) {
	t.Helper()
	k := newKeyring(t)
	for _, px := range shippedProxies {
		t.Run(px.name, func(t *testing.T) { test(t, startOIDCSite(t, k, px)) })
	}
}

// oidcSite is the sidecar binary with [sdk.oidc] against the real
// OpenID provider, behind a shipped proxy.
type oidcSite struct {
	base, front string
	idp         *harness.IDP
	client      harness.IDPClient
}

func startOIDCSite(t *testing.T, k *keyring, px shippedProxy) oidcSite {
	t.Helper()
	root := harness.ModuleRoot(t)
	front := harness.FreeAddr(t)
	callback := "http://" + front + "/auth/oidc/callback"
	client := harness.IDPClient{ID: "orders-web", Secret: "web-secret-0123456789abcdef", TenantID: "acme",
		Roles: []string{"viewer"}, Email: "ann@acme.example", RedirectURIs: []string{callback},
		BackchannelLogoutURI: "http://" + front + "/auth/oidc/backchannel-logout"}
	idp := harness.StartIDP(t, idpResource, 5*time.Minute, client)
	signin := harness.FreeAddr(t)
	s := startSidecar(t, k, map[string]string{
		"SVC_SIGNIN_ADDR":             signin,
		"SVC_OIDC_ISSUER_URL":         idp.Issuer,
		"SVC_OIDC_CLIENT_ID":          client.ID,
		"SVC_OIDC_CLIENT_SECRET_FILE": harness.WriteFile(t, t.TempDir(), "client-secret", client.Secret+"\n"),
		"SVC_OIDC_REDIRECT_URL":       callback,
	})
	up := harness.StartUpstream(t)
	base := startShippedProxyOn(t, front, px.bin, filepath.Join(root, px.file), px.args, map[string]string{
		"127.0.0.1:7700": s.HTTPAddr, "127.0.0.1:7701": signin, "127.0.0.1:5678": up.Addr,
	})
	return oidcSite{base: base, front: front, idp: idp, client: client}
}

// TestBrowserOIDC signs in with real Chromium through the shipped nginx
// and Caddy: a protected page, the provider, and back on the page signed
// in, with the session cookie as the SAML sign-in sets it.
func TestBrowserOIDC(t *testing.T) {
	t.Parallel()
	forEachOIDCSite(t, func(t *testing.T, site oidcSite) {
		b := harness.StartBrowser(t)
		const page = "/orders/7?expand=items&lang=en"
		b.Navigate(t, site.base+page)
		b.WaitPage(t, 60*time.Second, func(p harness.Page) bool {
			return p.URL == site.base+page && strings.Contains(p.Text, site.client.ID)
		})
		c := b.Cookie(t, site.base+"/", "svc_session")
		if c == nil || !c.HTTPOnly || c.SameSite != network.CookieSameSiteLax || c.Path != "/" {
			t.Errorf("session cookie %+v; want HttpOnly, SameSite=Lax, Path /", c)
		}
		if st := b.Cookie(t, site.base+"/auth/oidc/callback", "svc_session_oidc"); st != nil {
			t.Errorf("the state cookie outlived the sign-in: %+v", st)
		}
	})
}
