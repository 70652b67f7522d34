package e2e

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
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
			resp, raw := testkit.Do(t, b, req)
			body := string(raw)
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
		// browser, as the provider answers (with its iss): the provider
		// spends a code once.
		refused("replayed code", base+"/auth/oidc/callback?code="+url.QueryEscape(code)+"&state="+url.QueryEscape(startLogin(b))+
			"&iss="+url.QueryEscape(idp.Issuer), "oidc-code-refused")
		// The same without iss, which this provider always sends: no
		// answer of its own.
		refused("answer without iss", base+"/auth/oidc/callback?code="+url.QueryEscape(code)+"&state="+url.QueryEscape(startLogin(b)), "oidc-issuer-mismatch")
		refused("return_to another origin", base+"/auth/oidc/login?return_to="+url.QueryEscape("//evil.example/x"), "oidc-bad-return-to")

		// Logout at the provider (RP-initiated) reaches the sidecar by
		// back-channel: the session, even replayed, is refused.
		session := jarSession(t, b, front)
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

// TestShippedProxiesBrowserSignIn runs the sidecar binary with [sdk.saml]
// behind the shipped deploy/nginx/nginx.conf and deploy/caddy/Caddyfile:
// a browser without a session is redirected to the login, whose redirect
// to the IdP carries its page as RelayState, all through the proxy; an
// API client gets the JSON 401 as before; a browser refused otherwise
// gets the HTML page.
func TestShippedProxiesBrowserSignIn(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	idp := exampleIdP(t)
	md := harness.WriteFile(t, t.TempDir(), "idp.xml", string(idp.Metadata()))
	samlAddr := harness.FreeAddr(t)
	s := startSidecar(t, k, map[string]string{
		"SVC_SAML_ADDR":              samlAddr,
		"SVC_SAML_ENTITY_ID":         "http://127.0.0.1/auth/saml/metadata",
		"SVC_SAML_ACS_URL":           "http://127.0.0.1/auth/saml/acs",
		"SVC_SAML_IDP_METADATA_FILE": md,
	})
	root := harness.ModuleRoot(t)
	for _, px := range shippedProxies {
		t.Run(px.name, func(t *testing.T) {
			up := harness.StartUpstream(t)
			front := startShippedProxy(t, px.bin, filepath.Join(root, px.file), px.args, map[string]string{
				"127.0.0.1:7700": s.HTTPAddr, "127.0.0.1:7701": samlAddr, "127.0.0.1:5678": up.Addr,
			})
			// A browser of its own: the shared one may hold another test's
			// session for this host, and each proxy starts signed out.
			browser := newBrowser()
			get := func(path string, headers ...string) (*http.Response, string) {
				t.Helper()
				return getBody(t, browser, front+path, headers...)
			}

			resp, body := get("/orders/42?x=1", "Accept", browserAccept)
			login := "/auth/saml/login?return_to=" + url.QueryEscape("/orders/42?x=1")
			if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != login {
				t.Fatalf("browser without session: %s, want 302 to %s", harness.Describe(resp.StatusCode, resp.Header, []byte(body)), login)
			}
			resp, body = get(login, "Accept", browserAccept)
			to, _ := url.Parse(resp.Header.Get("Location"))
			if resp.StatusCode != http.StatusFound || to == nil || !strings.HasPrefix(to.String(), "https://idp.example.com/saml/sso?") ||
				to.Query().Get("RelayState") != "/orders/42?x=1" {
				t.Fatalf("login through the proxy: %s, want 302 to the IdP with RelayState /orders/42?x=1", harness.Describe(resp.StatusCode, resp.Header, []byte(body)))
			}

			for _, accept := range []string{"application/json", "*/*", ""} {
				var h []string
				if accept != "" {
					h = []string{"Accept", accept}
				}
				resp, body := get("/orders/42", h...)
				if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/json" ||
					!strings.HasPrefix(body, `{"allow":false,"deny_reasons":[],"reason":"token-missing","decision_id":"`) ||
					resp.Header.Get("Www-Authenticate") != "Bearer" {
					t.Errorf("API client, Accept %q: %s, want the JSON 401", accept, harness.Describe(resp.StatusCode, resp.Header, []byte(body)))
				}
			}

			// A bearer token is an API client's, whatever its Accept.
			resp, body = get("/orders/42", "Accept", browserAccept, "Authorization", "Bearer garbage")
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/json" ||
				!strings.Contains(body, `"reason":"token-malformed"`) {
				t.Errorf("bad bearer token: %s, want the JSON 401", harness.Describe(resp.StatusCode, resp.Header, []byte(body)))
			}
			// A browser with an expired session gets the HTML 401 when it
			// posts (no redirect: a POST cannot be repeated as a GET).
			req, _ := http.NewRequest(http.MethodPost, front+"/orders", strings.NewReader("a=1"))
			req.Header.Set("Accept", browserAccept)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Cookie", "svc_session=garbage")
			presp, raw := testkit.Do(t, browser, req)
			pbody := string(raw)
			if presp.StatusCode != http.StatusUnauthorized || presp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
				!strings.Contains(pbody, "<code>token-malformed</code>") || !strings.Contains(pbody, `href="/auth/saml/login"`) {
				t.Errorf("browser POST with a bad session: %s, want the HTML 401 with a sign-in link", harness.Describe(presp.StatusCode, presp.Header, []byte(pbody)))
			}
			if up.Hits() != 0 {
				t.Errorf("%d refused requests reached the upstream", up.Hits())
			}
		})
	}
}

// shippedProxy is a shipped proxy configuration and how its binary runs
// a copy of it in dir.
type shippedProxy struct {
	name, bin, file string
	args            func(dir, conf string) []string
}

// shippedProxies are the shipped nginx and Caddy configurations.
var shippedProxies = []shippedProxy{
	{"nginx", "nginx", "deploy/nginx/nginx.conf", func(dir, conf string) []string {
		return []string{"-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;"}
	}},
	{"caddy", "caddy", "deploy/caddy/Caddyfile", func(_, conf string) []string {
		return []string{"run", "--config", conf, "--adapter", "caddyfile"}
	}},
}

// startShippedNginx runs nginx on deploy/nginx/nginx.conf in front of the
// sidecar's HTTP listener httpAddr and the application app; the sign-in
// route goes to an address nothing listens on.
func startShippedNginx(t *testing.T, httpAddr, app string) string {
	t.Helper()
	px := shippedProxies[0]
	return startShippedProxy(t, px.bin, filepath.Join(harness.ModuleRoot(t), px.file), px.args,
		map[string]string{"127.0.0.1:7700": httpAddr, "127.0.0.1:7701": harness.FreeAddr(t), "127.0.0.1:5678": app})
}

// startBehindShippedNginx starts a sidecar verifying the keyring's tokens
// and an upstream behind deploy/nginx/nginx.conf, as startShippedNginx
// runs it; it returns the keyring, the sidecar, the upstream and nginx's
// base URL.
func startBehindShippedNginx(t *testing.T) (*keyring, *harness.Sidecar, *harness.Upstream, string) {
	t.Helper()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)
	up := harness.StartUpstream(t)
	return k, s, up, startShippedNginx(t, s.HTTPAddr, up.Addr)
}

// startShippedProxy runs a shipped proxy configuration with its loopback
// addresses replaced as repl says, listening on a free port in place of
// 8080; it returns the proxy's base URL once it accepts connections.
func startShippedProxy(t *testing.T, name, file string, args func(dir, conf string) []string, repl map[string]string) string {
	t.Helper()
	return startShippedProxyOn(t, harness.FreeAddr(t), name, file, args, repl)
}

// startShippedProxyOn is startShippedProxy listening on front, for a
// test that must name the proxy's address before it starts (a sign-in
// redirect URL).
func startShippedProxyOn(t *testing.T, front, name, file string, args func(dir, conf string) []string, repl map[string]string) string {
	t.Helper()
	bin := harness.LookPath(t, name, name)
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, port, _ := net.SplitHostPort(front)
	conf := string(raw)
	for from, to := range repl {
		if !strings.Contains(conf, from) {
			t.Fatalf("%s does not mention %s", file, from)
		}
		conf = strings.ReplaceAll(conf, from, to)
	}
	conf = strings.NewReplacer("listen 8080;", "listen "+front+";", "{$SVC_PROXY_LISTEN::8080} {", "{$SVC_PROXY_LISTEN::"+port+"} {",
		"/run/svc-nginx.pid", filepath.Join(dir, "nginx.pid")).Replace(conf)
	path := harness.WriteFile(t, dir, filepath.Base(file), conf)
	cmd := exec.Command(bin, args(dir, path)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
	p := harness.StartProcess(t, name, cmd)
	harness.WaitListening(t, p, front, 20*time.Second)
	return "http://" + front
}

// getBody GETs u with client c and the headers (name, value, ...), and
// returns the answer with its body read.
func getBody(t *testing.T, c *http.Client, u string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for i := 0; i < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, b := testkit.Do(t, c, req)
	return resp, string(b)
}

func readBody(resp *http.Response) (string, error) {
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
