package e2e

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

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
			presp, err := browser.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			pbody, _ := readBody(presp)
			presp.Body.Close()
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
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := readBody(resp)
	return resp, b
}

func readBody(resp *http.Response) (string, error) {
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
