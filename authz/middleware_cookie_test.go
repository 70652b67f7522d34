package authz_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/server"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/servertest"
)

// TestMiddlewareSessionCookie: with a session cookie configured, a request
// without an Authorization header is authenticated by the token in the
// cookie, which the sidecar checks exactly as a bearer token (over gRPC
// and over the HTTP API), for validation-only and policy routes alike. A
// request with an Authorization header never falls back to the cookie.
// The gateway's "__Host-" cookie decides whenever it is there: an
// unprefixed cookie of the same name, which a sibling subdomain can toss,
// neither displaces it nor stands in for an expired one.
func TestMiddlewareSessionCookie(t *testing.T) {
	p := servertest.NewIDP(t)
	srv := servertest.NewServer(t, servertest.NewEngine(t, p, nil))
	viewer := p.TokenFor(t, servertest.FixedUser("alice", "viewer"))
	// mallory's token is valid: what a sibling subdomain tosses as an
	// unprefixed cookie to sign the victim in as mallory.
	mallory := p.TokenFor(t, servertest.FixedUser("mallory", "viewer"))
	expired := p.TokenFor(t, map[string]any{"sub": "alice", "tenant_id": tenant, "exp": time.Now().Add(-time.Hour).Unix(), "iat": servertest.FixedIat})
	clients := map[string]*authz.Client{
		"grpc": newClient(t, servertest.ServeGRPC(t, srv), authz.FailClosed),
		"http": newClient(t, servertest.ServeHTTP(t, srv), authz.FailClosed),
	}
	type req struct {
		method string
		path   string
		header map[string]string
	}
	cookie := func(name, v string) map[string]string { return map[string]string{"Cookie": name + "=" + v} }
	tests := []struct {
		name    string
		opts    authz.MiddlewareOptions
		req     req
		status  int
		reason  string
		subject string
	}{
		{name: "cookie alone", opts: authz.MiddlewareOptions{SessionCookie: "svc_session"},
			req: req{path: "/profile", header: cookie("svc_session", viewer)}, status: 200, reason: "ok", subject: "alice"},
		{name: "cookie among others", opts: authz.MiddlewareOptions{SessionCookie: "svc_session"},
			req: req{path: "/profile", header: map[string]string{"Cookie": "theme=dark; svc_session=" + viewer + "; lang=fr"}}, status: 200, reason: "ok", subject: "alice"},
		{name: "cookie on a policy route, allowed", opts: authz.MiddlewareOptions{SessionCookie: "svc_session", Action: routeAction},
			req: req{path: "/orders/o-1", header: cookie("svc_session", viewer)}, status: 200, reason: "policy-allow", subject: "alice"},
		{name: "cookie on a policy route, denied", opts: authz.MiddlewareOptions{SessionCookie: "svc_session", Action: routeAction},
			req: req{method: http.MethodDelete, path: "/orders/o-1", header: cookie("svc_session", viewer)}, status: 403, reason: "policy-deny"},
		{name: "expired token in the cookie", opts: authz.MiddlewareOptions{SessionCookie: "svc_session"},
			req: req{path: "/profile", header: cookie("svc_session", expired)}, status: 401, reason: "token-expired"},
		{name: "garbage in the cookie", opts: authz.MiddlewareOptions{SessionCookie: "svc_session"},
			req: req{path: "/profile", header: cookie("svc_session", "not-a-jwt")}, status: 401, reason: "token-malformed"},
		{name: "another cookie name", opts: authz.MiddlewareOptions{SessionCookie: "svc_session"},
			req: req{path: "/profile", header: cookie("other", viewer)}, status: 401, reason: "token-missing"},
		{name: "no session cookie configured", opts: authz.MiddlewareOptions{},
			req: req{path: "/profile", header: cookie("svc_session", viewer)}, status: 401, reason: "token-missing"},
		{name: "Basic Authorization header and a cookie", opts: authz.MiddlewareOptions{SessionCookie: "svc_session"},
			req: req{path: "/profile", header: map[string]string{"Authorization": "Basic YTpi", "Cookie": "svc_session=" + viewer}}, status: 401, reason: "token-missing"},
		{name: "bearer wins over the cookie", opts: authz.MiddlewareOptions{SessionCookie: "svc_session"},
			req: req{path: "/profile", header: map[string]string{"Authorization": "Bearer " + expired, "Cookie": "svc_session=" + viewer}}, status: 401, reason: "token-expired"},
		{name: "__Host- cookie", opts: authz.MiddlewareOptions{SessionCookie: "svc_session"},
			req: req{path: "/profile", header: cookie("__Host-svc_session", viewer)}, status: 200, reason: "ok", subject: "alice"},
		{name: "__Host- cookie over a tossed one sent before it", opts: authz.MiddlewareOptions{SessionCookie: "svc_session"},
			req: req{path: "/profile", header: map[string]string{"Cookie": "svc_session=" + mallory + "; __Host-svc_session=" + viewer}}, status: 200, reason: "ok", subject: "alice"},
		{name: "__Host- cookie over a tossed one sent after it", opts: authz.MiddlewareOptions{SessionCookie: "svc_session"},
			req: req{path: "/profile", header: map[string]string{"Cookie": "__Host-svc_session=" + viewer + "; svc_session=" + mallory}}, status: 200, reason: "ok", subject: "alice"},
		{name: "expired __Host- cookie is not replaced by a tossed one", opts: authz.MiddlewareOptions{SessionCookie: "svc_session"},
			req: req{path: "/profile", header: map[string]string{"Cookie": "svc_session=" + mallory + "; __Host-svc_session=" + expired}}, status: 401, reason: "token-expired"},
		{name: "__Host- cookie of another name", opts: authz.MiddlewareOptions{SessionCookie: "svc_session"},
			req: req{path: "/profile", header: cookie("__Host-other", viewer)}, status: 401, reason: "token-missing"},
		{name: "__Host- custom cookie name", opts: authz.MiddlewareOptions{SessionCookie: "app_sess"},
			req: req{path: "/profile", header: cookie("__Host-app_sess", viewer)}, status: 200, reason: "ok", subject: "alice"},
		{name: "custom cookie name", opts: authz.MiddlewareOptions{SessionCookie: "app_sess"},
			req: req{path: "/profile", header: cookie("app_sess", viewer)}, status: 200, reason: "ok", subject: "alice"},
	}
	for tr, c := range clients {
		for _, tt := range tests {
			t.Run(tr+"/"+tt.name, func(t *testing.T) {
				base := servertest.Protect(t, c, tt.opts).URL
				method := tt.req.method
				if method == "" {
					method = http.MethodGet
				}
				got := servertest.Post(t, method, base+tt.req.path, "", tt.req.header)
				if got.Status != tt.status {
					t.Fatalf("status %d, want %d: %s", got.Status, tt.status, got.Body)
				}
				var body struct {
					Reason  string         `json:"reason"`
					Subject string         `json:"subject"`
					Claims  map[string]any `json:"claims"`
				}
				if err := json.Unmarshal(got.Body, &body); err != nil {
					t.Fatalf("body %s: %v", got.Body, err)
				}
				if body.Reason != tt.reason || body.Subject != tt.subject {
					t.Errorf("reason %q subject %q, want %q %q", body.Reason, body.Subject, tt.reason, tt.subject)
				}
				if tt.status == 200 && body.Claims["email"] != "alice@example.com" {
					t.Errorf("claims %v: want the verified claims of the cookie's token", body.Claims)
				}
				if tt.status == 401 && tt.reason != "token-missing" {
					if h := got.Header.Get("WWW-Authenticate"); !strings.Contains(h, `error="invalid_token"`) {
						t.Errorf("WWW-Authenticate %q", h)
					}
				}
			})
		}
	}
}

// TestMiddlewareSessionCookieFromConfig: with no SessionCookie option the
// middleware takes the cookie the deployment's configuration names
// (sdk.session.cookie_name or its older names through the Client, the
// engine's for server.Local), none without a sign-in gateway, and "-"
// turns it off; where the gateways' URLs (SAML acs_url, OpenID Connect
// redirect_url) are known and none is plain http on loopback, only the
// __Host- cookie counts, whoever named it.
func TestMiddlewareSessionCookieFromConfig(t *testing.T) {
	p := servertest.NewIDP(t)
	eng := servertest.NewEngine(t, p, nil)
	addr := servertest.ServeGRPC(t, servertest.NewServer(t, eng))
	viewer := p.TokenFor(t, servertest.FixedUser("alice", "viewer"))
	client := func(env map[string]string) *authz.Client {
		c, err := authz.NewClient(addr, authz.ClientOptions{FailMode: authz.FailClosed, Timeout: 30 * time.Second, Logger: servertest.QuietLogger(),
			ConfigFile: "-", LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// The engine does not read the IdP metadata; the gateway would.
	samlEngine := servertest.NewEngine(t, p, func(c *config.Config) {
		c.SDK.SAML = &config.SAML{EntityID: "https://app.example.com/auth/saml/metadata", ACSURL: "https://app.example.com/auth/saml/acs",
			IDPMetadataFile: filepath.Join(t.TempDir(), "idp.xml"), CookieName: "engine_sess"}
	})

	oidcEnv := map[string]string{"SVC_OIDC_ISSUER_URL": "https://idp.example.com", "SVC_OIDC_REDIRECT_URL": "https://app.example.com/auth/oidc/callback"}
	dir := t.TempDir()
	write := func(name, text string) string {
		f := filepath.Join(dir, name)
		testkit.WriteFile(t, f, []byte(text))
		return f
	}
	oidcFile := write("oidc.toml", "[sdk.oidc]\nissuer_url = \"https://idp.example.com\"\nredirect_url = \"https://app.example.com/auth/oidc/callback\"\n")
	// One provider signs in on loopback http (local development): its
	// cookies are unprefixed, so the unprefixed cookie is read.
	mixedFile := write("mixed.toml", "[sdk.oidc]\nissuer_url = \"https://idp.example.com\"\nredirect_url = \"https://app.example.com/auth/oidc/callback\"\n\n"+
		"[[sdk.oidc.providers]]\nname = \"dev\"\ntenant = \"t2\"\nissuer_url = \"http://127.0.0.1:9000\"\nredirect_url = \"http://127.0.0.1:8080/auth/oidc/callback\"\n")
	fileClient := func(file string) *authz.Client {
		c, err := authz.NewClient(addr, authz.ClientOptions{FailMode: authz.FailClosed, Timeout: 30 * time.Second, Logger: servertest.QuietLogger(),
			ConfigFile: file, LookupEnv: func(string) (string, bool) { return "", false }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	oidcEngine := servertest.NewEngine(t, p, func(c *config.Config) {
		c.SDK.OIDC = &config.OIDC{IssuerURL: "https://idp.example.com", ClientID: "app", RedirectURL: "https://app.example.com/auth/oidc/callback"}
		c.SDK.Session.CookieName = "oidc_sess"
	})

	tests := []struct {
		name   string
		a      authz.Authorizer
		opts   authz.MiddlewareOptions
		cookie string
		status int
	}{
		{"SVC_SAML_COOKIE_NAME", client(map[string]string{"SVC_SAML_COOKIE_NAME": "app_sess"}), authz.MiddlewareOptions{}, "app_sess", 200},
		{"SVC_SAML_ENTITY_ID: the default name", client(map[string]string{"SVC_SAML_ENTITY_ID": "https://app.example.com/auth/saml/metadata"}), authz.MiddlewareOptions{}, "svc_session", 200},
		{"no SAML gateway: no cookie", client(nil), authz.MiddlewareOptions{}, "svc_session", 401},
		{"turned off", client(map[string]string{"SVC_SAML_COOKIE_NAME": "app_sess"}), authz.MiddlewareOptions{SessionCookie: "-"}, "app_sess", 401},
		{"option over the configuration", client(map[string]string{"SVC_SAML_COOKIE_NAME": "app_sess"}), authz.MiddlewareOptions{SessionCookie: "mine"}, "mine", 200},
		// Behind a gateway on https every cookie it sets is prefixed: an
		// unprefixed one was tossed in by a sibling subdomain.
		{"local engine with [sdk.saml] on https: a tossed cookie", server.Local(samlEngine), authz.MiddlewareOptions{}, "engine_sess", 401},
		{"local engine with [sdk.saml] on https", server.Local(samlEngine), authz.MiddlewareOptions{}, "__Host-engine_sess", 200},
		{"SVC_SAML_ACS_URL on https: a tossed cookie", client(map[string]string{"SVC_SAML_COOKIE_NAME": "app_sess", "SVC_SAML_ACS_URL": "https://app.example.com/auth/saml/acs"}),
			authz.MiddlewareOptions{}, "app_sess", 401},
		{"SVC_SAML_ACS_URL on https", client(map[string]string{"SVC_SAML_COOKIE_NAME": "app_sess", "SVC_SAML_ACS_URL": "https://app.example.com/auth/saml/acs"}),
			authz.MiddlewareOptions{}, "__Host-app_sess", 200},
		{"SVC_SAML_ACS_URL on https, the cookie named by the option: a tossed cookie", client(map[string]string{"SVC_SAML_ACS_URL": "https://app.example.com/auth/saml/acs"}),
			authz.MiddlewareOptions{SessionCookie: "mine"}, "mine", 401},
		{"SVC_SAML_ACS_URL on loopback http", client(map[string]string{"SVC_SAML_COOKIE_NAME": "app_sess", "SVC_SAML_ACS_URL": "http://127.0.0.1:8080/auth/saml/acs"}),
			authz.MiddlewareOptions{}, "app_sess", 200},
		{"prefixed only by option", client(map[string]string{"SVC_SAML_COOKIE_NAME": "app_sess"}),
			authz.MiddlewareOptions{SessionCookie: "mine", SessionCookiePrefixedOnly: true}, "mine", 401},
		{"prefixed only by option, the prefixed cookie", client(map[string]string{"SVC_SAML_COOKIE_NAME": "app_sess"}),
			authz.MiddlewareOptions{SessionCookie: "mine", SessionCookiePrefixedOnly: true}, "__Host-mine", 200},
		{"local engine without [sdk.saml]", server.Local(eng), authz.MiddlewareOptions{}, "svc_session", 401},
		// Behind an OpenID Connect gateway alone, on https, likewise:
		// the session cookie is there, and only prefixed.
		{"SVC_OIDC_ISSUER_URL: the default name", client(oidcEnv), authz.MiddlewareOptions{}, "__Host-svc_session", 200},
		{"SVC_OIDC_REDIRECT_URL on https: a tossed cookie", client(oidcEnv), authz.MiddlewareOptions{}, "svc_session", 401},
		{"SVC_OIDC_REDIRECT_URL on https, the cookie named by the option: a tossed cookie", client(oidcEnv),
			authz.MiddlewareOptions{SessionCookie: "svc_session"}, "svc_session", 401},
		{"SVC_SESSION_COOKIE_NAME", client(map[string]string{"SVC_OIDC_ISSUER_URL": "https://idp.example.com", "SVC_SESSION_COOKIE_NAME": "app_sess",
			"SVC_OIDC_REDIRECT_URL": "https://app.example.com/auth/oidc/callback"}), authz.MiddlewareOptions{}, "__Host-app_sess", 200},
		{"svc.toml with [sdk.oidc] on https: a tossed cookie", fileClient(oidcFile), authz.MiddlewareOptions{SessionCookie: "svc_session"}, "svc_session", 401},
		{"svc.toml with [sdk.oidc] on https", fileClient(oidcFile), authz.MiddlewareOptions{}, "__Host-svc_session", 200},
		{"svc.toml with a provider on loopback http", fileClient(mixedFile), authz.MiddlewareOptions{SessionCookie: "svc_session"}, "svc_session", 200},
		{"SAML on https, OpenID Connect on loopback http", client(map[string]string{"SVC_SAML_ACS_URL": "https://app.example.com/auth/saml/acs",
			"SVC_OIDC_ISSUER_URL": "http://127.0.0.1:9000", "SVC_OIDC_REDIRECT_URL": "http://127.0.0.1:8080/auth/oidc/callback"}),
			authz.MiddlewareOptions{SessionCookie: "svc_session"}, "svc_session", 200},
		{"local engine with [sdk.oidc] on https: a tossed cookie", server.Local(oidcEngine), authz.MiddlewareOptions{}, "oidc_sess", 401},
		{"local engine with [sdk.oidc] on https", server.Local(oidcEngine), authz.MiddlewareOptions{}, "__Host-oidc_sess", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := servertest.Protect(t, tt.a, tt.opts).URL
			got := servertest.Post(t, http.MethodGet, base+"/profile", "", map[string]string{"Cookie": tt.cookie + "=" + viewer})
			if got.Status != tt.status {
				t.Errorf("status %d, want %d: %s", got.Status, tt.status, got.Body)
			}
		})
	}
}

// TestClientSessionCookie: where a Client finds the session cookie's
// name: SVC_SESSION_COOKIE_NAME, SVC_SAML_COOKIE_NAME, then
// sdk.session.cookie_name and sdk.saml.cookie_name of svc.toml, then
// svc_session when the deployment has a sign-in gateway (SAML or OpenID
// Connect), else none; a name that is not a cookie name is a
// configuration error naming its key.
func TestClientSessionCookie(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		f := filepath.Join(dir, name)
		testkit.WriteFile(t, f, []byte(text))
		return f
	}
	named := write("named.toml", "[sdk]\nfail_mode = \"closed\"\n\n[sdk.saml]\nentity_id = \"https://app.example.com/auth/saml/metadata\"\ncookie_name = \"file_sess\"\n")
	unnamed := write("unnamed.toml", "[sdk.saml]\nentity_id = \"https://app.example.com/auth/saml/metadata\"\n")
	plain := write("plain.toml", "[sdk]\nfail_mode = \"closed\"\n")
	bad := write("bad.toml", "[sdk.saml]\ncookie_name = \"a b\"\n")
	prefixed := write("prefixed.toml", "[sdk.saml]\ncookie_name = \"__Host-svc_session\"\n")
	session := write("session.toml", "[sdk.session]\ncookie_name = \"session_sess\"\n\n[sdk.oidc]\nissuer_url = \"https://idp.example.com\"\n")
	both := write("both.toml", "[sdk.session]\ncookie_name = \"session_sess\"\n\n[sdk.saml]\nentity_id = \"x\"\ncookie_name = \"file_sess\"\n")
	sessionOnly := write("session-only.toml", "[sdk.session]\ncookie_name = \"session_sess\"\n")
	oidc := write("oidc.toml", "[sdk.oidc]\nissuer_url = \"https://idp.example.com\"\n")
	providers := write("providers.toml", "[[sdk.oidc.providers]]\nname = \"a\"\ntenant = \"t\"\nissuer_url = \"https://idp.example.com\"\n")
	badSession := write("bad-session.toml", "[sdk.session]\ncookie_name = \"a b\"\n\n[sdk.oidc]\nissuer_url = \"https://idp.example.com\"\n")
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	tests := []struct {
		name, file string
		env        map[string]string
		want       string
		wantErr    string
	}{
		{name: "svc.toml names it", file: named, want: "file_sess"},
		{name: "svc.toml has [sdk.saml]: the default", file: unnamed, want: "svc_session"},
		{name: "no [sdk.saml]", file: plain, want: ""},
		{name: "no file", file: "-", want: ""},
		{name: "environment over the file", file: named, env: map[string]string{"SVC_SAML_COOKIE_NAME": "env_sess"}, want: "env_sess"},
		{name: "SVC_SAML_ENTITY_ID alone", file: "-", env: map[string]string{"SVC_SAML_ENTITY_ID": "x"}, want: "svc_session"},
		{name: "[sdk.session] names it", file: session, want: "session_sess"},
		{name: "[sdk.session] over [sdk.saml]", file: both, want: "session_sess"},
		{name: "[sdk.session] without a gateway", file: sessionOnly, want: ""},
		{name: "[sdk.oidc]: the default", file: oidc, want: "svc_session"},
		{name: "[[sdk.oidc.providers]]: the default", file: providers, want: "svc_session"},
		{name: "SVC_OIDC_ISSUER_URL: the default", file: "-", env: map[string]string{"SVC_OIDC_ISSUER_URL": "https://idp.example.com"}, want: "svc_session"},
		{name: "SVC_SESSION_COOKIE_NAME over SVC_SAML_COOKIE_NAME", file: named,
			env: map[string]string{"SVC_SESSION_COOKIE_NAME": "new_sess", "SVC_SAML_COOKIE_NAME": "old_sess"}, want: "new_sess"},
		{name: "SVC_SAML_COOKIE_NAME over [sdk.session]", file: session, env: map[string]string{"SVC_SAML_COOKIE_NAME": "env_sess"}, want: "env_sess"},
		{name: "bad name in the file", file: bad, wantErr: "sdk.saml.cookie_name"},
		{name: "bad name in [sdk.session]", file: badSession, wantErr: "sdk.session.cookie_name"},
		{name: "bad name in SVC_SESSION_COOKIE_NAME", file: "-", env: map[string]string{"SVC_SESSION_COOKIE_NAME": "a b"}, wantErr: "sdk.session.cookie_name"},
		{name: "bad name in the environment", file: "-", env: map[string]string{"SVC_SAML_COOKIE_NAME": "a;b"}, wantErr: "sdk.saml.cookie_name"},
		// The sidecar refuses these names at start; the client alike.
		{name: "__Host- prefix in the file", file: prefixed, wantErr: "must not start with __Host- or __Secure-"},
		{name: "__Secure- prefix in the environment", file: "-", env: map[string]string{"SVC_SAML_COOKIE_NAME": "__secure-s"}, wantErr: "must not start with __Host- or __Secure-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := authz.NewClient("[::1]:1", authz.ClientOptions{FailMode: authz.FailClosed, ConfigFile: tt.file, LookupEnv: env(tt.env)})
			if testkit.ExpectErr(t, err, tt.wantErr) {
				return
			}
			defer c.Close()
			if got := c.SessionCookie(); got != tt.want {
				t.Errorf("SessionCookie() = %q, want %q", got, tt.want)
			}
		})
	}
}
