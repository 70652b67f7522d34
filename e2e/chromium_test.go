package e2e

import (
	"bytes"
	"fmt"
	"html"
	"html/template"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

// A real browser (headless Chromium) through the demo's front proxy: what
// a person sees signing in, out, being refused, and what the browser keeps.

// browserDemo is the demo with browser sign-in and one browser in front
// of it.
type browserDemo struct {
	demoSAML
	b *harness.Browser
	// front is the front proxy's base URL, "http://127.0.0.1:port".
	front string
}

// startBrowserDemo starts the demo with browser sign-in (OpenID Connect
// and SAML, or SAML alone with opts.samlOnly) and a browser, once the SAML
// gateway has the IdP's metadata (before, its sign-in answers 503).
func startBrowserDemo(t *testing.T, opts demoOptions) browserDemo {
	t.Helper()
	d := startDemoSAML(t, opts)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	loginRedirect(t, &http.Client{Timeout: 10 * time.Second, CheckRedirect: noRedirect.CheckRedirect, Jar: jar}, d.front.URL, "/")
	return browserDemo{demoSAML: d, b: harness.StartBrowser(t), front: d.front.URL}
}

// onIdP reports whether the page is the demo IdP's "sign in as" page.
func (d browserDemo) onIdP(p harness.Page) bool {
	return strings.HasPrefix(p.URL, d.saml.BaseURL+"/sso?") && strings.Contains(p.Text, "Sign in as")
}

// at returns a page condition: the address is the front proxy's path and
// the text holds every one of want.
func (d browserDemo) at(path string, want ...string) func(harness.Page) bool {
	return func(p harness.Page) bool {
		if p.URL != d.front+path {
			return false
		}
		for _, w := range want {
			if !strings.Contains(p.Text, w) {
				return false
			}
		}
		return true
	}
}

// pickUser clicks the demo user's button on the IdP's sign-in page the
// browser shows.
func (d browserDemo) pickUser(t *testing.T, user string) {
	t.Helper()
	d.b.WaitPage(t, 30*time.Second, d.onIdP)
	d.b.Click(t, fmt.Sprintf(`button[name="user"][value=%q]`, user))
}

// signIn opens path with no session, which must take the browser to the
// IdP's sign-in page; picking user must bring it back to path, signed in,
// the page holding want.
func (d browserDemo) signIn(t *testing.T, path, user string, want ...string) harness.Page {
	t.Helper()
	d.b.Navigate(t, d.front+path)
	d.pickUser(t, user)
	return d.b.WaitPage(t, 30*time.Second, d.at(path, want...))
}

// signedIn makes sure the browser shows /home signed in as user, signing
// in (again) when it is sent to the IdP.
func (d browserDemo) signedIn(t *testing.T, user string) {
	t.Helper()
	email := user + "@demo.example"
	d.b.Navigate(t, d.front+"/home")
	p := d.b.WaitPage(t, 20*time.Second, func(p harness.Page) bool { return d.onIdP(p) || p.URL == d.front+"/home" })
	if p.URL == d.front+"/home" && strings.Contains(p.Text, "Subject\n"+email) {
		return
	}
	if p.URL == d.front+"/home" {
		d.b.ClearCookies(t)
		d.b.Navigate(t, d.front+"/home")
	}
	d.pickUser(t, user)
	d.b.WaitPage(t, 30*time.Second, d.at("/home", "Subject\n"+email))
}

// refusalPage: bill (billing) may not read orders (role-forbidden).
// Signing in on /orders/7 ends on the refusal page, HTML with the reason
// code, the policy's deny reasons and the decision id, not the check's JSON.
func refusalPage(t *testing.T, d browserDemo) {
	t.Helper()
	d.b.ClearCookies(t)
	d.b.Navigate(t, d.front+"/orders/7")
	d.pickUser(t, "bill")
	p := d.b.WaitPage(t, 30*time.Second, d.at("/orders/7"))
	if !strings.Contains(p.Text, "policy-deny") {
		t.Fatalf("the refusal page does not name its reason code policy-deny: %s\n%s", p, d.b.HTML(t))
	}
	if !strings.Contains(p.Text, "role-forbidden") {
		t.Errorf("the refusal page does not say why (role-forbidden): %s", p)
	}
	if doc := d.lastDocument(t, d.front+"/orders/7"); doc.Status != http.StatusForbidden || doc.MIMEType != "text/html" {
		t.Errorf("answer %+v, want 403 text/html", doc)
	}
	if id := deniedRecord(t, d.sidecar, "bill@demo.example", "orders:read", "7", "role-forbidden"); id == "" || !strings.Contains(p.Text, id) {
		t.Errorf("the page does not show the decision id %q: %s", id, p)
	}
	if strings.HasPrefix(strings.TrimSpace(p.Text), "{") {
		t.Errorf("the browser was shown JSON: %s", p)
	}
}

// session returns the session cookie as the browser stores it for the
// front proxy's origin, nil when it has none.
func (d browserDemo) session(t *testing.T) *network.Cookie {
	t.Helper()
	return d.b.Cookie(t, d.front+"/", "svc_session")
}

// lastDocument returns the browser's last document answer whose address
// starts with prefix.
func (d browserDemo) lastDocument(t *testing.T, prefix string) harness.DocumentResponse {
	t.Helper()
	docs := d.b.Documents()
	for i := len(docs) - 1; i >= 0; i-- {
		if strings.HasPrefix(docs[i].URL, prefix) {
			return docs[i]
		}
	}
	t.Fatalf("the browser got no document from %s: %+v", prefix, docs)
	return harness.DocumentResponse{}
}

// deniedRecord waits for the audit record of user's denied action on the
// resource id whose deny reasons mention reason, and returns the decision
// id of the latest such record.
func deniedRecord(t *testing.T, s *harness.Sidecar, user, action, id, reason string) string {
	t.Helper()
	var found string
	testkit.EventuallyWithin(t, 10*time.Second, fmt.Sprintf("an audit record of %s denied %s on %s with %s", user, action, id, reason), func() bool {
		found = ""
		for _, rec := range s.AuditRecords(t) {
			res, _ := rec["resource"].(map[string]any)
			if rec["allow"] == true || rec["user_id"] != user || rec["action"] != action || res["id"] != id {
				continue
			}
			if strings.Contains(fmt.Sprint(rec["deny_reasons"]), reason) {
				found, _ = rec["decision_id"].(string)
			}
		}
		return found != ""
	})
	return found
}

// TestBrowserSAML follows a person through the demo behind nginx on
// deploy/demo/nginx.conf, with SAML the only sign-in, so that a browser
// goes straight to the IdP: sign-in from a protected page, the session
// cookie, the home page, a sidecar restart, sign-out, a refusal, and a
// login-CSRF attempt from another site.
func TestBrowserSAML(t *testing.T) {
	d := startBrowserDemo(t, demoOptions{samlOnly: true})

	if !t.Run("sign-in from a protected page lands on it", func(t *testing.T) {
		// A query of several parameters comes back whole.
		const page = "/orders/7?expand=items&lang=en"
		d.b.Navigate(t, d.front+page)
		d.b.WaitPage(t, 30*time.Second, d.onIdP)
		// The sign-on is bound to this browser by a request cookie that
		// must reach the ACS with the IdP's cross-site POST: SameSite=None,
		// so Secure, which Chromium keeps from http on loopback.
		acs := d.front + "/auth/saml/acs"
		req := d.b.Cookie(t, acs, "svc_session_req")
		if req == nil || !req.Secure || req.SameSite != network.CookieSameSiteNone || !req.HTTPOnly || req.Path != "/auth/saml" {
			t.Errorf("sign-on request cookie %+v; want HttpOnly, Secure, SameSite=None, Path /auth/saml", req)
		}
		d.pickUser(t, "dana")
		d.b.WaitPage(t, 30*time.Second, d.at(page, `"subject":"dana@demo.example"`, `"tenant":"demo"`))
		if req := d.b.Cookie(t, acs, "svc_session_req"); req != nil {
			t.Errorf("the sign-on request cookie outlived the sign-on: %+v", req)
		}
	}) {
		// The steps below start signed in.
		t.Run("login CSRF from another site fails", func(t *testing.T) { loginCSRF(t, d) })
		return
	}

	t.Run("session cookie as the browser stores it", func(t *testing.T) {
		c := d.session(t)
		if c == nil {
			t.Fatalf("no svc_session cookie; cookies: %+v", d.b.Cookies(t, d.front+"/"))
		}
		// docs/saml.md: HttpOnly, SameSite=Lax, Secure unless the
		// ACS is plain http on loopback (as here), Path /, Max-Age the
		// token's lifetime (sdk.saml.token_ttl, 15m by default).
		if !c.HTTPOnly || c.SameSite != network.CookieSameSiteLax || c.Secure || c.Path != "/" || c.Session || c.Domain != "127.0.0.1" {
			t.Errorf("cookie %+v; want HttpOnly, SameSite=Lax, not Secure (http on loopback), Path /, host-only, persistent", c)
		}
		if left := time.Until(time.Unix(int64(c.Expires), 0)); left < 13*time.Minute || left > 15*time.Minute+5*time.Second {
			t.Errorf("cookie expires in %s, want about the token's 15m", left)
		}
	})

	t.Run("home page names the person", func(t *testing.T) {
		d.b.Navigate(t, d.front+"/home")
		p := d.b.WaitPage(t, 20*time.Second, d.at("/home", "dana@demo.example"))
		for _, want := range []string{"Tenant\ndemo", "Roles\nviewer", "Sign out"} {
			if !strings.Contains(p.Text, want) {
				t.Errorf("home page lacks %q: %s", want, p)
			}
		}
	})

	t.Run("session survives a sidecar restart", func(t *testing.T) {
		cmd := exec.Command(harness.Binary(t, "core"), "--sidecar", d.sidecar.URL(""), "sidecar", "restart", "--drain-timeout", "10")
		cmd.Env = append(cmd.Environ(), "SVC_ADMIN_TOKEN_FILE="+filepath.Join(harness.ModuleRoot(t), "deploy", "demo", "admin-token"))
		// The new image is ready before it has fetched the IdP's metadata
		// again; core waits for it to be healthy and says so.
		if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "healthy ") {
			t.Fatalf("core sidecar restart: %v\n%s", err, out)
		}
		before := len(d.b.Documents())
		d.b.Navigate(t, d.front+"/home")
		p := d.b.WaitPage(t, 20*time.Second, func(p harness.Page) bool { return p.URL == d.front+"/home" || d.onIdP(p) })
		if p.URL != d.front+"/home" || !strings.Contains(p.Text, "dana@demo.example") {
			t.Fatalf("after the restart the browser is not signed in: %s", p)
		}
		for _, doc := range d.b.Documents()[before:] {
			if strings.HasPrefix(doc.URL, d.saml.BaseURL) {
				t.Errorf("the browser went through the IdP again: %+v", doc)
			}
		}
	})

	t.Run("sign-out lands on the sign-in page", func(t *testing.T) {
		d.signedIn(t, "dana")
		// Sign out goes to the landing page (sdk.session.default_return_to,
		// /home), which is protected: without a session the browser is
		// sent to sign in, where the person may pick someone else.
		d.b.Click(t, "#logout")
		d.b.WaitPage(t, 30*time.Second, d.onIdP)
		if c := d.session(t); c != nil {
			t.Errorf("the session cookie survived sign-out: %+v", c)
		}
		d.pickUser(t, "bill")
		p := d.b.WaitPage(t, 30*time.Second, d.at("/home", "bill@demo.example"))
		if !strings.Contains(p.Text, "billing") {
			t.Errorf("home page after switching to bill: %s", p)
		}
	})

	t.Run("a refusal is a page for people", func(t *testing.T) { refusalPage(t, d) })

	t.Run("login CSRF from another site fails", func(t *testing.T) { loginCSRF(t, d) })
}

// TestBrowserDemo walks step 3 of docs/demo.md in Chromium, on the demo
// as shipped, with both sign-ins: for each row of the step's table, a
// protected page sends the browser to the sign-in page, which offers
// OpenID Connect and SAML; the row's link leads to that provider's
// "Sign in as" page, and its user brings the browser back to the page,
// signed in, then the home page (an allowed request) names them. Between
// the rows, "Sign out" leads to the sign-in page again. Last, a user of
// another tenant signing in with OpenID Connect is refused.
func TestBrowserDemo(t *testing.T) {
	rows := readmeSignIns(t)
	d := startBrowserDemo(t, demoOptions{})
	for i, row := range rows {
		if !t.Run(row.signIn, func(t *testing.T) {
			if i > 0 {
				d.signOut(t)
			}
			d.b.Navigate(t, d.front+row.path)
			d.chooseSignIn(t, row.path, row.link)
			d.pickOn(t, row.signIn, row.user)
			d.b.WaitPage(t, 30*time.Second, d.at(row.path, row.want...))

			subject := ""
			for _, w := range row.want {
				if v, ok := strings.CutPrefix(w, `"subject":"`); ok {
					subject = strings.TrimSuffix(v, `"`)
				}
			}
			if subject == "" {
				t.Fatalf("docs/demo.md: the %s sign-in shows no subject: %q", row.signIn, row.want)
			}
			// Signed in: the next request passes the check on the cookie.
			d.b.Navigate(t, d.front+"/home")
			d.b.WaitPage(t, 20*time.Second, d.at("/home", "Subject\n"+subject, "Tenant\ndemo"))
			c := d.session(t)
			if c == nil || !c.HTTPOnly || c.SameSite != network.CookieSameSiteLax || c.Path != "/" {
				t.Errorf("session cookie %+v; want HttpOnly, SameSite=Lax, Path /", c)
			}
			if st := d.b.Cookie(t, d.front+"/auth/oidc/callback", "svc_session_oidc"); st != nil {
				t.Errorf("the OpenID Connect state cookie outlived the sign-in: %+v", st)
			}
		}) {
			return
		}
	}

	t.Run("OpenID Connect, another tenant is refused", func(t *testing.T) {
		d.signOut(t)
		d.b.Navigate(t, d.front+"/orders/7")
		d.chooseSignIn(t, "/orders/7", "Sign in with OpenID Connect")
		d.pickOn(t, "OpenID Connect", "olga")
		p := d.b.WaitPage(t, 30*time.Second, d.at("/orders/7", "policy-deny"))
		if !strings.Contains(p.Text, "tenant-mismatch") {
			t.Errorf("the refusal page does not say why (tenant-mismatch): %s", p)
		}
		if doc := d.lastDocument(t, d.front+"/orders/7"); doc.Status != http.StatusForbidden || doc.MIMEType != "text/html" {
			t.Errorf("answer %+v, want 403 text/html", doc)
		}
	})
}

// chooseSignIn waits for the sign-in page the browser is sent to from
// path, which must offer OpenID Connect and SAML, and clicks its link
// named link.
func (d browserDemo) chooseSignIn(t *testing.T, path, link string) {
	t.Helper()
	d.b.WaitPage(t, 30*time.Second, func(p harness.Page) bool {
		return p.URL == d.front+"/auth/oidc/login?return_to="+url.QueryEscape(path) &&
			strings.Contains(p.Text, "Sign in with OpenID Connect") && strings.Contains(p.Text, "Sign in with SAML single sign-on")
	})
	m := regexp.MustCompile(`<a class="p" href="([^"]+)">` + regexp.QuoteMeta(link) + `</a>`).FindStringSubmatch(d.b.HTML(t))
	if m == nil {
		t.Fatalf("the sign-in page has no link %q:\n%s", link, d.b.HTML(t))
	}
	d.b.Click(t, fmt.Sprintf(`a[href=%q]`, html.UnescapeString(m[1])))
}

// pickOn clicks user on the "Sign in as" page of the provider of signIn
// ("OpenID Connect" or "SAML"), which the browser must show.
func (d browserDemo) pickOn(t *testing.T, signIn, user string) {
	t.Helper()
	switch signIn {
	case "SAML":
		d.pickUser(t, user)
		return
	case "OpenID Connect":
	default:
		t.Fatalf("no provider for the sign-in %q", signIn)
	}
	d.b.WaitPage(t, 30*time.Second, func(p harness.Page) bool {
		return strings.HasPrefix(p.URL, d.idp.Issuer+"/interaction/") && strings.Contains(p.Text, "Sign in as")
	})
	d.b.Click(t, fmt.Sprintf(`button[name="user"][value=%q]`, user))
}

// signOut clicks "Sign out" on the home page, signed in, which must lead
// to the sign-in page.
func (d browserDemo) signOut(t *testing.T) {
	t.Helper()
	d.b.Navigate(t, d.front+"/home")
	d.b.WaitPage(t, 20*time.Second, d.at("/home", "Sign out"))
	d.b.Click(t, "#logout")
	d.b.WaitPage(t, 30*time.Second, func(p harness.Page) bool {
		return strings.HasPrefix(p.URL, d.front+"/auth/oidc/login?") && strings.Contains(p.Text, "Sign in with OpenID Connect")
	})
	if c := d.session(t); c != nil {
		t.Errorf("the session cookie survived sign-out: %+v", c)
	}
}

// loginCSRF: an attacker signs in at the IdP as themselves, answering a
// login the attacker started in their own client, and has the victim's
// browser post that response to the ACS from a page on another site. The
// victim must not end up signed in as the attacker.
func loginCSRF(t *testing.T, d browserDemo) {
	t.Helper()
	// The victim: a browser with no session.
	d.b.ClearCookies(t)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	attacker := &http.Client{Timeout: 10 * time.Second, CheckRedirect: noRedirect.CheckRedirect, Jar: jar}
	ans := askIdP(t, loginRedirect(t, attacker, d.front, "/home")+"&user=olga")

	// The attacker's page, on another site: 127.0.0.2 is not 127.0.0.1.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2: %v", err)
	}
	page := template.Must(template.New("").Parse(`<!doctype html><html><body onload="document.forms[0].submit()">
<form method="post" action="{{.ACSURL}}"><input type="hidden" name="SAMLResponse" value="{{.SAMLResponse}}">
<input type="hidden" name="RelayState" value="{{.RelayState}}"></form></body></html>`))
	var buf bytes.Buffer
	if err := page.Execute(&buf, ans); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(buf.Bytes())
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()

	d.b.Navigate(t, srv.URL+"/win-a-prize")
	p := d.b.WaitPage(t, 30*time.Second, func(p harness.Page) bool { return strings.HasPrefix(p.URL, d.front) })
	if c := d.session(t); c != nil {
		t.Fatalf("the victim's browser was signed in by the attacker's response: cookie %+v, page %s", c, p)
	}
	doc := d.lastDocument(t, d.front+"/auth/saml/acs")
	if doc.Status < 400 || doc.Status >= 500 {
		t.Errorf("the ACS answered the cross-site post with %d, want a refusal", doc.Status)
	}
	if strings.Contains(p.Text, "olga") {
		t.Errorf("the victim sees the attacker's identity: %s", p)
	}
	// The gateway's refusal, as a page: the browser started no sign-on.
	if !strings.Contains(p.Text, "saml-request-not-bound") || doc.MIMEType != "text/html" {
		t.Errorf("the victim sees %s (%s), want the saml-request-not-bound page", p, doc.MIMEType)
	}
	// And nothing of the attacker's is left: the home page asks to sign in.
	d.b.Navigate(t, d.front+"/home")
	d.b.WaitPage(t, 30*time.Second, d.onIdP)
}

// TestBrowserSAMLCaddy is the same person behind Caddy on the shipped
// deploy/caddy/Caddyfile (forward_auth), with the orders service as its
// application: sign-in, sign-out to another user, a refusal.
func TestBrowserSAMLCaddy(t *testing.T) {
	d := startBrowserDemo(t, demoOptions{caddy: true, samlOnly: true})
	if !t.Run("sign-in from a protected page lands on it", func(t *testing.T) {
		d.signIn(t, "/orders/7", "dana", `"subject":"dana@demo.example"`)
		if c := d.session(t); c == nil || !c.HTTPOnly || c.SameSite != network.CookieSameSiteLax {
			t.Errorf("session cookie %+v", c)
		}
	}) {
		return
	}
	t.Run("sign-out lands on the sign-in page", func(t *testing.T) {
		d.signedIn(t, "dana")
		d.b.Click(t, "#logout")
		d.pickUser(t, "bill")
		d.b.WaitPage(t, 30*time.Second, d.at("/home", "bill@demo.example"))
	})
	t.Run("a refusal is a page for people", func(t *testing.T) { refusalPage(t, d) })
}

// TestBrowserSAMLSessionExpiry: once the session's token has expired the
// browser is sent through sign-in again, whether it dropped the cookie
// (its Max-Age is the token's lifetime) or still sends the expired token.
func TestBrowserSAMLSessionExpiry(t *testing.T) {
	const ttl = 3 * time.Second
	d := startBrowserDemo(t, demoOptions{
		samlOnly: true,
		env:      map[string]string{"SVC_SAML_TOKEN_TTL": ttl.String()},
		// Without the default 30s of clock skew the token is refused as
		// soon as it expires.
		config: func(toml string) string {
			if !strings.Contains(toml, "\n[jwt]\n") {
				t.Fatal("deploy/demo/svc.toml has no [jwt] table")
			}
			return strings.Replace(toml, "\n[jwt]\n", "\n[jwt]\nclock_skew = \"1s\"\n", 1)
		},
	})
	d.signIn(t, "/orders/7", "dana", `"subject":"dana@demo.example"`)
	c := d.session(t)
	if c == nil {
		t.Fatal("no session cookie after sign-in")
	}
	expires := time.Unix(int64(c.Expires), 0)
	if left := time.Until(expires); left > ttl+time.Second {
		t.Fatalf("cookie expires in %s, want at most the token's %s", left, ttl)
	}
	// Past the expiry and the 1s of skew, with a margin: the cookie's
	// expiry is whole seconds.
	time.Sleep(time.Until(expires) + 3*time.Second)

	t.Run("the browser dropped the cookie", func(t *testing.T) {
		if c := d.session(t); c != nil {
			t.Fatalf("cookie kept after its Max-Age: %+v", c)
		}
		d.b.Navigate(t, d.front+"/orders/7")
		d.b.WaitPage(t, 30*time.Second, d.onIdP)
	})

	t.Run("the browser sends the expired token", func(t *testing.T) {
		// A browser whose clock is behind, or a cookie kept some other
		// way: the expired token itself reaches the check.
		d.b.SetCookie(t, d.front+"/", network.SetCookieParams{
			Name: "svc_session", Value: c.Value, Path: "/", HTTPOnly: new(true),
			Expires: cdp.TimeSinceEpoch(time.Now().Add(time.Hour).Unix()),
		})
		if got := d.session(t); got == nil || got.Value != c.Value {
			t.Fatalf("cookie not set: %+v", got)
		}
		d.b.Navigate(t, d.front+"/orders/7")
		d.pickUser(t, "dana")
		d.b.WaitPage(t, 30*time.Second, d.at("/orders/7", `"subject":"dana@demo.example"`))
		if got := d.session(t); got == nil || got.Value == c.Value {
			t.Errorf("sign-in did not replace the expired token: %+v", got)
		}
	})
}
