package envoy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
)

// TestShippedProxiesSendBrowsersToSignIn runs the shipped nginx.conf and
// Caddyfile in front of a sidecar with [sdk.saml]: a browser without a
// session is redirected to the login, relative to the site, to come back
// to its page; a browser refused otherwise gets the HTML page; API
// clients get the JSON they always did.
func TestShippedProxiesSendBrowsersToSignIn(t *testing.T) {
	idp := newTestIdP(t)
	base := testConfig(idp, config.FailClosed)
	mux := http.NewServeMux()
	newTestServer(t, samlConfig(base, nil), newTestEngine(t, base, idp)).RegisterHTTP(mux)
	sidecar := httptest.NewServer(mux)
	t.Cleanup(sidecar.Close)
	sidecarAddr := strings.TrimPrefix(sidecar.URL, "http://")
	other := idp.token(t, map[string]any{"sub": "u-other", "tenant_id": "globex", "role": "admin"})
	viewer := idp.token(t, map[string]any{"sub": "u-viewer", "tenant_id": testTenant, "role": "viewer"})

	for _, p := range shippedProxies(t) {
		t.Run(p.bin, func(t *testing.T) {
			bin := testkit.LookPath(t, p.bin, p.bin, "/usr/sbin/"+p.bin)
			app := strings.TrimPrefix(echoApp(t).URL, "http://")
			repl := append([]string{"127.0.0.1:7700", sidecarAddr, "127.0.0.1:7701", samlUpstream(t), "127.0.0.1:5678", app}, p.extra...)
			front := startProxy(t, bin, p.args, p.shipped, p.conf, repl...)
			client := &http.Client{Timeout: 5 * time.Second,
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			send := func(method, path string, headers ...string) (*http.Response, string) {
				t.Helper()
				req, err := http.NewRequestWithContext(t.Context(), method, front+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < len(headers); i += 2 {
					req.Header.Set(headers[i], headers[i+1])
				}
				resp, b := testkit.Do(t, client, req)
				return resp, string(b)
			}
			const login = "/auth/saml/login?return_to=%2Forders%2F7%3Fx%3D1"

			t.Run("browser without session is redirected to sign in", func(t *testing.T) {
				for _, method := range []string{"GET", "HEAD"} {
					resp, body := send(method, "/orders/7?x=1", "Accept", acceptChrome)
					if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != login {
						t.Fatalf("%s: %d Location %q, want 302 to %s; body %s", method, resp.StatusCode, resp.Header.Get("Location"), login, body)
					}
					if got := resp.Header.Values("Content-Type"); len(got) > 1 {
						t.Errorf("%s: Content-Type %q given twice", method, got)
					}
				}
			})
			t.Run("browser with expired session cookie is redirected", func(t *testing.T) {
				expired := idp.token(t, map[string]any{"tenant_id": testTenant, "role": "viewer",
					"iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": time.Now().Add(-time.Hour).Unix()})
				resp, _ := send("GET", "/orders/7?x=1", "Accept", acceptFirefox, "Cookie", "svc_session="+expired)
				if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != login {
					t.Fatalf("%d Location %q, want 302 to %s", resp.StatusCode, resp.Header.Get("Location"), login)
				}
			})
			t.Run("browser with a session reaches the app", func(t *testing.T) {
				resp, body := send("GET", "/orders/7?x=1", "Accept", acceptChrome, "Cookie", "svc_session="+viewer)
				if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"x-svc-user-id":"u-viewer"`) {
					t.Fatalf("%d %s", resp.StatusCode, body)
				}
			})
			t.Run("browser POST without session gets the page", func(t *testing.T) {
				resp, body := send("POST", "/orders", "Accept", acceptChrome)
				checkProxyPage(t, resp, body, http.StatusUnauthorized, "token-missing", `href="/auth/saml/login"`)
			})
			t.Run("browser policy deny gets the page", func(t *testing.T) {
				resp, body := send("GET", "/orders/7", "Accept", acceptChrome, "Cookie", "svc_session="+other)
				checkProxyPage(t, resp, body, http.StatusForbidden, "policy-deny", "")
			})
			for _, c := range []struct{ name, accept string }{{"json", "application/json"}, {"curl", "*/*"}, {"none", ""}} {
				t.Run("API client "+c.name+" keeps the JSON 401", func(t *testing.T) {
					var h []string
					if c.accept != "" {
						h = []string{"Accept", c.accept}
					}
					resp, body := send("GET", "/orders/7?x=1", h...)
					want := `{"allow":false,"deny_reasons":[],"reason":"token-missing","decision_id":"<decision-id>"}`
					if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/json" ||
						uuidRE.ReplaceAllString(body, "<decision-id>") != want || resp.Header.Get("Location") != "" {
						t.Fatalf("%d %v %s; want 401 %s", resp.StatusCode, resp.Header, body, want)
					}
					if resp.Header.Get("Www-Authenticate") != "Bearer" {
						t.Errorf("WWW-Authenticate %q", resp.Header.Get("Www-Authenticate"))
					}
				})
			}
		})
	}
}

func checkProxyPage(t *testing.T, resp *http.Response, body string, status int, reason, link string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d; %s", resp.StatusCode, status, body)
	}
	if got := resp.Header.Values("Content-Type"); len(got) != 1 || got[0] != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q, want one text/html", got)
	}
	if !strings.HasPrefix(body, "<!doctype html>") || !strings.Contains(body, "<code>"+reason+"</code>") {
		t.Errorf("not the page for %s: %s", reason, body)
	}
	if link != "" && !strings.Contains(body, link) {
		t.Errorf("page lacks %s: %s", link, body)
	}
	if link == "" && strings.Contains(body, "href=") {
		t.Errorf("page has a link: %s", body)
	}
}
