package oidcgw_test

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/issuer"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/oidcgw"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

type rig struct {
	op  *testOP
	gw  *oidcgw.Gateway
	url string // the gateway's server
	srv *httptest.Server
	is  *issuer.Issuer
}

// revoked is the gateway's answer of whether the session of claims
// was ended (Gateway.Revoked); an error fails the test.
func (r *rig) revoked(t *testing.T, claims map[string]any) bool {
	t.Helper()
	got, err := r.gw.Revoked(t.Context(), claims)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func newRig(t *testing.T, edit func(*config.Config)) *rig {
	t.Helper()
	return newRigOf(t, newTestOP(t, "app"), edit)
}

// newRigOf serves a gateway of op on loopback.
func newRigOf(t *testing.T, op *testOP, edit func(*config.Config)) *rig {
	t.Helper()
	return newRigOn(t, op, httptest.NewServer, edit)
}

// newRigOn serves a gateway of op on the server that serve starts
// (httptest.NewServer, or NewTLSServer for a public https URL).
func newRigOn(t *testing.T, op *testOP, serve func(http.Handler) *httptest.Server, edit func(*config.Config)) *rig {
	t.Helper()
	return newRigWith(t, op, serve, edit, oidcgw.Deps{})
}

// newRigWith is newRigOn with the gateway's deps (its Issuer is set
// here).
func newRigWith(t *testing.T, op *testOP, serve func(http.Handler) *httptest.Server, edit func(*config.Config), deps oidcgw.Deps) *rig {
	t.Helper()
	var h http.Handler
	srv := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	cfg := config.Config{SDK: config.SDK{OIDC: &config.OIDC{IssuerURL: op.URL, ClientID: "app", RedirectURL: srv.URL + "/auth/oidc/callback"}}}
	if edit != nil {
		edit(&cfg)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	is, err := issuer.New(issuer.Options{Issuer: cfg.SDK.Session.Issuer, TTL: cfg.SDK.Session.TokenTTL.Duration})
	if err != nil {
		t.Fatal(err)
	}
	deps.Issuer = is
	gw, err := oidcgw.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	h = gw.Handler()
	return &rig{op: op, gw: gw, url: srv.URL, srv: srv, is: is}
}

// browser is a client that keeps cookies and stops at every redirect.
func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Accept", "application/json")
	res, body := testkit.Do(t, c, req)
	return res, string(body)
}

// toCallback starts a sign-in and follows it to the provider; it returns
// the callback URL the provider sends the browser to.
func (r *rig) toCallback(t *testing.T, b *http.Client, returnTo string) string {
	t.Helper()
	res, body := get(t, b, r.url+"/auth/oidc/login?return_to="+url.QueryEscape(returnTo))
	if res.StatusCode != http.StatusFound {
		t.Fatalf("login: %d %s", res.StatusCode, body)
	}
	res, body = get(t, b, res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %d %s", res.StatusCode, body)
	}
	return res.Header.Get("Location")
}

// wantRefused fails the test unless what (a callback) was answered 401
// with code.
func wantRefused(t *testing.T, what string, res *http.Response, body string, code reason.Code) {
	t.Helper()
	if res.StatusCode != http.StatusUnauthorized || refusal(t, body) != code {
		t.Fatalf("%s: %d %s, want 401 %s", what, res.StatusCode, body, code)
	}
}

// wantNoTokenCalls fails the test if a code reached op's token endpoint.
func (op *testOP) wantNoTokenCalls(t *testing.T) {
	t.Helper()
	if n := op.tokenCalls.Load(); n != 0 {
		t.Fatalf("a code went to the token endpoint of %s (%d posts)", op.URL, n)
	}
}

func refusal(t *testing.T, body string) reason.Code {
	t.Helper()
	var r struct {
		Error reason.Code `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("not a refusal: %s", body)
	}
	return r.Error
}

func TestSignIn(t *testing.T) {
	r := newRig(t, nil)
	b := browser(t)
	res, body := get(t, b, r.toCallback(t, b, "/orders?page=2"))
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/orders?page=2" {
		t.Fatalf("callback: %d %s %s, want 303 to /orders?page=2", res.StatusCode, res.Header.Get("Location"), body)
	}
	var session string
	for _, c := range res.Cookies() {
		if c.Name == "svc_session" && c.Value != "" {
			session = c.Value
		}
	}
	if session == "" {
		t.Fatalf("no session cookie in %v", res.Header["Set-Cookie"])
	}
	jwks, err := r.is.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	claims, err := testkit.VerifyJWT(jwks, session)
	if err != nil {
		t.Fatalf("session token: %v", err)
	}
	for k, want := range map[string]any{"sub": "ann", "tenant_id": "acme", "email": "ann@acme.example", "idp": "default", "idp_sid": "sid-1"} {
		if claims[k] != want {
			t.Errorf("claim %s = %v, want %v", k, claims[k], want)
		}
	}
	if roles, _ := json.Marshal(claims["roles"]); string(roles) != `["viewer"]` {
		t.Errorf("roles = %s", roles)
	}
}

// TestSignInOverHTTPSUsesHostCookies: behind an https URL every cookie
// the gateway sets is __Host-<name>, Secure, Path=/ and without Domain, so
// that a sibling subdomain cannot toss in a session or a pending sign-in;
// the unprefixed session cookie of before is cleared.
func TestSignInOverHTTPSUsesHostCookies(t *testing.T) {
	r := newRigOn(t, newTestOP(t, "app"), httptest.NewTLSServer, nil)
	b := browser(t)
	b.Transport = r.srv.Client().Transport
	res, body := get(t, b, r.url+"/auth/oidc/login?return_to=%2Forders")
	if res.StatusCode != http.StatusFound {
		t.Fatalf("login: %d %s", res.StatusCode, body)
	}
	set := res.Cookies()
	res, body = get(t, b, res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %d %s", res.StatusCode, body)
	}
	res, body = get(t, b, res.Header.Get("Location"))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("callback: %d %s", res.StatusCode, body)
	}
	set = append(set, res.Cookies()...)
	var session, clearedPlain bool
	for _, c := range set {
		switch {
		case c.Name == "svc_session" && c.MaxAge < 0:
			clearedPlain = true
			continue
		case c.Name == "__Host-svc_session" && c.Value != "":
			session = true
		}
		if !strings.HasPrefix(c.Name, wire.HostCookiePrefix) || !c.Secure || c.Path != "/" || c.Domain != "" {
			t.Errorf("cookie %s: Secure=%v Path=%q Domain=%q, want __Host-, Secure, Path=/ and no Domain", c.Name, c.Secure, c.Path, c.Domain)
		}
	}
	if !session || !clearedPlain {
		t.Errorf("session cookie __Host-svc_session set: %v, unprefixed svc_session cleared: %v; cookies %v", session, clearedPlain, set)
	}
}

// Each attack is refused with its own stable reason.
func TestSignInAttacks(t *testing.T) {
	t.Run("forged state", func(t *testing.T) {
		r := newRig(t, nil)
		cb := r.toCallback(t, browser(t), "/") // the attacker's own sign-in
		res, body := get(t, browser(t), cb)    // followed by the victim
		wantRefused(t, "callback", res, body, reason.OIDCStateNotBound)
		b := browser(t)
		cb = r.toCallback(t, b, "/")
		u, _ := url.Parse(cb)
		q := u.Query()
		q.Set("state", strings.Repeat("A", 43))
		u.RawQuery = q.Encode()
		if res, body := get(t, b, u.String()); refusal(t, body) != reason.OIDCStateNotBound {
			t.Fatalf("made-up state: %d %s", res.StatusCode, body)
		}
	})
	t.Run("replayed code", func(t *testing.T) {
		r := newRig(t, nil)
		b := browser(t)
		cb := r.toCallback(t, b, "/")
		if res, body := get(t, b, cb); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("first use: %d %s", res.StatusCode, body)
		}
		// The same callback again: its state was used.
		b2 := browser(t)
		cb2 := r.toCallback(t, b2, "/")
		u, _ := url.Parse(cb)
		u2, _ := url.Parse(cb2)
		q := u2.Query()
		q.Set("code", u.Query().Get("code")) // the used code, on a fresh state of this browser
		u2.RawQuery = q.Encode()
		res, body := get(t, b2, u2.String())
		wantRefused(t, "replayed code", res, body, reason.OIDCCodeRefused)
		if _, body := get(t, b2, cb2); refusal(t, body) != reason.OIDCStateNotBound && refusal(t, body) != reason.OIDCStateUnknown {
			t.Fatalf("replayed state: %s", body)
		}
	})
	t.Run("replayed callback", func(t *testing.T) {
		r := newRig(t, nil)
		b := browser(t)
		cb := r.toCallback(t, b, "/")
		_ = r.toCallback(t, b, "/") // a second pending sign-in keeps the cookie
		kept := stateCookieOf(t, b, r)
		if res, body := get(t, b, cb); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("first use: %d %s", res.StatusCode, body)
		}
		// Put the cookie back, its sealed sign-in and all, as an attacker
		// who kept it would.
		setStateCookieOf(t, b, r, kept)
		res, body := get(t, b, cb)
		wantRefused(t, "replayed callback", res, body, reason.OIDCStateUnknown)
	})
	// A provider that answers with what a real one never sends.
	for _, tt := range []struct {
		name   string
		op     func(*testOP)
		status int
		want   reason.Code
	}{
		{"wrong nonce", func(op *testOP) { op.wrongNonce = true }, http.StatusUnauthorized, reason.OIDCNonceMismatch},
		{"ID token for another audience", func(op *testOP) { op.audience = "another-app" }, http.StatusUnauthorized, reason.OIDCAudienceMismatch},
		{"tenant missing", func(op *testOP) { delete(op.claims, "tenant_id") }, http.StatusForbidden, reason.OIDCTenantMissing},
		{"no subject", func(op *testOP) { op.claims["sub"] = "" }, http.StatusUnauthorized, reason.OIDCIDTokenInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil)
			tt.op(r.op)
			b := browser(t)
			res, body := get(t, b, r.toCallback(t, b, "/"))
			if res.StatusCode != tt.status || refusal(t, body) != tt.want {
				t.Fatalf("%d %s, want %d %s", res.StatusCode, body, tt.status, tt.want)
			}
		})
	}
	t.Run("return_to another origin", func(t *testing.T) {
		r := newRig(t, nil)
		for _, rt := range []string{"https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)"} {
			res, body := get(t, browser(t), r.url+"/auth/oidc/login?return_to="+url.QueryEscape(rt))
			if res.StatusCode != http.StatusBadRequest || refusal(t, body) != reason.OIDCBadReturnTo {
				t.Errorf("return_to %q: %d %s, want 400 %s", rt, res.StatusCode, body, reason.OIDCBadReturnTo)
			}
		}
	})
	t.Run("provider error", func(t *testing.T) {
		r := newRig(t, nil)
		b := browser(t)
		u, _ := url.Parse(r.toCallback(t, b, "/"))
		q := u.Query()
		q.Del("code")
		q.Set("error", "access_denied")
		u.RawQuery = q.Encode()
		if _, body := get(t, b, u.String()); refusal(t, body) != reason.OIDCProviderError {
			t.Fatalf("%s, want %s", body, reason.OIDCProviderError)
		}
	})
}

func TestLoginPageOffersProviders(t *testing.T) {
	r := newRig(t, func(c *config.Config) {
		c.SDK.OIDC.Providers = []config.OIDCProvider{{Name: "globex", Tenant: "globex", IssuerURL: "https://login.globex.example", ClientID: "g"}}
	})
	res, body := get(t, browser(t), r.url+"/auth/oidc/login?return_to=/x")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "provider=default&amp;return_to=%2Fx") || !strings.Contains(body, "provider=globex") {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	// [sdk.oidc]'s own provider is named by what it is, not "default".
	if !strings.Contains(body, ">Sign in with OpenID Connect</a>") || !strings.Contains(body, ">Sign in with globex</a>") || strings.Contains(body, "Sign in with default") {
		t.Errorf("the page does not name the providers: %s", body)
	}
	// One provider for the tenant: straight through.
	res, _ = get(t, browser(t), r.url+"/auth/oidc/login?tenant=acme")
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), r.op.URL) {
		t.Fatalf("tenant acme: %d %s, want 302 to its provider", res.StatusCode, res.Header.Get("Location"))
	}
	res, _ = get(t, browser(t), r.url+"/auth/oidc/login?provider=default")
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), r.op.URL) {
		t.Fatalf("provider=default: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if res, body := get(t, browser(t), r.url+"/auth/oidc/login?provider=nope"); refusal(t, body) != reason.OIDCUnknownProvider {
		t.Fatalf("unknown provider: %d %s", res.StatusCode, body)
	}
}
