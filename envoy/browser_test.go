package envoy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/svc-dev/svc/engine/config"
)

// Accept headers as clients send them.
const (
	acceptChrome  = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
	acceptFirefox = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
)

// samlConfig is cfg with [sdk.saml] as far as the proxy path reads it,
// the gateway on plain http on loopback: its session cookie is the
// unprefixed svc_session, and a __Host- one wins over it.
func samlConfig(cfg config.Config, redirect *bool) config.Config {
	cfg.SDK.SAML = &config.SAML{CookieName: "svc_session", PathPrefix: "/auth/saml", BrowserRedirect: redirect,
		ACSURL: "http://127.0.0.1:8080/auth/saml/acs"}
	return cfg
}

// browserServers run the proxy path with SAML configured (redirect on and
// off) and without it; the engine verifies the IdP's tokens either way,
// from the Authorization header or the session cookie.
func browserServers(t *testing.T, idp *testIdP) map[string]*Server {
	t.Helper()
	off := false
	base := testConfig(idp, config.FailClosed)
	limited := testConfig(idp, config.FailClosed)
	limited.RateLimit.PerTenant = map[string]int{testTenant: 1}
	out := map[string]*Server{}
	for name, c := range map[string]struct{ cfg, engine config.Config }{
		"saml":         {samlConfig(base, nil), base},
		"saml-off":     {samlConfig(base, &off), base},
		"plain":        {base, base},
		"saml-limited": {samlConfig(limited, nil), limited},
	} {
		out[name] = newTestServer(t, c.cfg, newTestEngine(t, c.engine, idp))
	}
	return out
}

// outcome is what a client is answered, in the terms of the negotiation.
type outcome struct {
	status int
	// kind: "json" (the DenyBody), "html" (the page), "redirect" (302 to
	// login), "allow".
	kind string
	// location: the login URL of a redirect, or of the page's link ("" for
	// none).
	location string
	reason   string
}

type browserCase struct {
	name    string
	server  string // default "saml"
	method  string
	path    string
	headers map[string]string
	want    outcome
}

func browserCases(t *testing.T, idp *testIdP) []browserCase {
	viewer := idp.token(t, map[string]any{"sub": "u-viewer", "tenant_id": testTenant, "role": "viewer"})
	other := idp.token(t, map[string]any{"sub": "u-other", "tenant_id": "globex", "role": "admin"})
	expired := idp.token(t, map[string]any{"tenant_id": testTenant, "role": "viewer",
		"iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": time.Now().Add(-time.Hour).Unix()})
	const login = "/auth/saml/login?return_to=%2Fapi%2Forders%2F7%3Fx%3D1%26y%3D%25C3%25A9"
	const path = "/api/orders/7?x=1&y=%C3%A9"
	h := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	// The answers most cases expect: an API client's JSON 401 for a
	// request without a credential, a browser sent to sign in (for
	// reason), and an allowed request.
	apiMissing := outcome{http.StatusUnauthorized, "json", "", "token-missing"}
	toSignIn := func(reason string) outcome { return outcome{http.StatusFound, "redirect", login, reason} }
	allowed := outcome{http.StatusOK, "allow", "", ""}
	return []browserCase{
		{name: "browser without session is sent to sign in", method: "GET", path: path, headers: h("accept", acceptChrome),
			want: toSignIn("token-missing")},
		{name: "firefox HEAD without session is sent to sign in", method: "HEAD", path: path, headers: h("accept", acceptFirefox),
			want: toSignIn("token-missing")},
		{name: "expired session cookie is sent to sign in", method: "GET", path: path,
			headers: h("accept", acceptChrome, "cookie", "theme=dark; svc_session="+expired),
			want:    toSignIn("token-expired")},
		{name: "malformed session cookie is sent to sign in", method: "GET", path: path,
			headers: h("accept", acceptChrome, "cookie", "svc_session=garbage"),
			want:    toSignIn("token-malformed")},
		{name: "html and json equally preferred is a browser", method: "GET", path: path, headers: h("accept", "application/json, text/html"),
			want: toSignIn("token-missing")},
		{name: "valid session cookie is allowed", method: "GET", path: path,
			headers: h("accept", acceptChrome, "cookie", "svc_session="+viewer),
			want:    allowed},
		{name: "valid __Host- session cookie is allowed", method: "GET", path: path,
			headers: h("accept", acceptChrome, "cookie", "__Host-svc_session="+viewer),
			want:    allowed},
		// A sibling subdomain tosses svc_session; the browser sends it
		// first when its path is longer. The gateway's cookie decides.
		{name: "__Host- session cookie decides over a tossed one", method: "GET", path: path,
			headers: h("accept", acceptChrome, "cookie", "svc_session="+other+"; __Host-svc_session="+viewer),
			want:    allowed},
		{name: "expired __Host- session cookie is not replaced by a tossed one", method: "GET", path: path,
			headers: h("accept", acceptChrome, "cookie", "svc_session="+viewer+"; __Host-svc_session="+expired),
			want:    toSignIn("token-expired")},
		{name: "browser policy deny is a page without sign-in", method: "GET", path: "/api/orders/7",
			headers: h("accept", acceptChrome, "cookie", "svc_session="+other),
			want:    outcome{http.StatusForbidden, "html", "", "policy-deny"}},
		{name: "browser POST without session is a page with sign-in", method: "POST", path: "/api/orders",
			headers: h("accept", acceptChrome),
			want:    outcome{http.StatusUnauthorized, "html", "/auth/saml/login", "token-missing"}},
		{name: "bearer token in Authorization is an API client", method: "GET", path: path,
			headers: h("accept", acceptChrome, "authorization", "Bearer a.b.c"),
			want:    outcome{http.StatusUnauthorized, "json", "", "token-malformed"}},
		{name: "empty Authorization is an API client", method: "GET", path: path,
			headers: h("accept", acceptChrome, "authorization", ""),
			want:    apiMissing},
		{name: "bearer token policy deny is JSON", method: "GET", path: "/api/orders/7",
			headers: h("accept", acceptChrome, "authorization", "Bearer "+other),
			want:    outcome{http.StatusForbidden, "json", "", "policy-deny"}},
		{name: "unsafe return path is left out", method: "GET", path: "//evil.example/x", headers: h("accept", acceptChrome),
			want: outcome{http.StatusFound, "redirect", "/auth/saml/login", "token-missing"}},
		{name: "redirect off: page with sign-in", server: "saml-off", method: "GET", path: path, headers: h("accept", acceptChrome),
			want: outcome{http.StatusUnauthorized, "html", login, "token-missing"}},
		{name: "SAML unconfigured: page without sign-in", server: "plain", method: "GET", path: path, headers: h("accept", acceptChrome),
			want: outcome{http.StatusUnauthorized, "html", "", "token-missing"}},
		{name: "SAML unconfigured: cookie is not read", server: "plain", method: "GET", path: path,
			headers: h("accept", acceptChrome, "cookie", "svc_session="+viewer),
			want:    outcome{http.StatusUnauthorized, "html", "", "token-missing"}},
		{name: "API client json", method: "GET", path: path, headers: h("accept", "application/json"),
			want: apiMissing},
		{name: "curl */*", method: "GET", path: path, headers: h("accept", "*/*"),
			want: apiMissing},
		{name: "no Accept", method: "GET", path: path,
			want: apiMissing},
		{name: "json preferred by q", method: "GET", path: path, headers: h("accept", "text/html;q=0.5, application/json;q=0.9"),
			want: apiMissing},
		{name: "html refused by q=0", method: "GET", path: path, headers: h("accept", "text/html;q=0, */*"),
			want: apiMissing},
		{name: "text/* is not text/html", method: "GET", path: path, headers: h("accept", "text/*"),
			want: apiMissing},
		{name: "json client with expired cookie", method: "GET", path: path,
			headers: h("accept", "application/json", "cookie", "svc_session="+expired),
			want:    outcome{http.StatusUnauthorized, "json", "", "token-expired"}},
		{name: "API client policy deny", method: "GET", path: "/api/orders/7",
			headers: h("authorization", "Bearer "+other),
			want:    outcome{http.StatusForbidden, "json", "", "policy-deny"}},
	}
}

// via is one way a proxy asks: it turns a client request into the check
// and the check's answer into what the client gets.
type via struct {
	name string
	do   func(t *testing.T, s *Server, tc browserCase) (status int, h http.Header, body []byte)
}

func httpVia(conv string) via {
	return via{conv, func(t *testing.T, s *Server, tc browserCase) (int, http.Header, []byte) {
		mux := http.NewServeMux()
		s.RegisterHTTP(mux)
		var req *http.Request
		switch conv {
		case "nginx":
			req = httptest.NewRequest("GET", CheckPath, nil)
			req.Header.Set("X-Original-URI", tc.path)
			req.Header.Set("X_Svc_Method", tc.method)
		case "caddy":
			req = httptest.NewRequest("GET", CheckPath, nil)
			req.Header.Set("X-Forwarded-Uri", tc.path)
			req.Header.Set("X-Forwarded-Method", tc.method)
		case "envoy-http":
			req = httptest.NewRequest(tc.method, EnvoyCheckPrefix+tc.path, nil)
		}
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w.Code, w.Header(), w.Body.Bytes()
	}}
}

var grpcVia = via{"envoy-grpc", func(t *testing.T, s *Server, tc browserCase) (int, http.Header, []byte) {
	resp, err := s.Check(t.Context(), checkReq(tc.method, tc.path, tc.headers, nil))
	if err != nil {
		t.Fatal(err)
	}
	if ok := resp.GetOkResponse(); ok != nil {
		return http.StatusOK, http.Header{}, nil
	}
	d := resp.GetDeniedResponse()
	h := http.Header{}
	for _, o := range d.GetHeaders() {
		if o.AppendAction != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
			t.Errorf("header %s appended, want overwrite", o.Header.Key)
		}
		h.Add(o.Header.Key, o.Header.Value)
	}
	return int(d.GetStatus().GetCode()), h, []byte(d.GetBody())
}}

func TestBrowserNegotiation(t *testing.T) {
	idp := newTestIdP(t)
	servers := browserServers(t, idp)
	vias := []via{httpVia("nginx"), httpVia("caddy"), httpVia("envoy-http"), grpcVia}
	for _, v := range vias {
		t.Run(v.name, func(t *testing.T) {
			for _, tc := range browserCases(t, idp) {
				t.Run(tc.name, func(t *testing.T) {
					if v.name == "envoy-http" && strings.HasPrefix(tc.path, "//") {
						t.Skip("Envoy normalizes the path before its HTTP check")
					}
					server := tc.server
					if server == "" {
						server = "saml"
					}
					status, h, body := v.do(t, servers[server], tc)
					checkOutcome(t, v.name, tc.want, status, h, body)
					if tc.want.kind == "json" {
						// Byte for byte the answer of a client that sends no
						// Accept, as before the negotiation existed.
						plain := tc
						plain.headers = map[string]string{}
						for k, val := range tc.headers {
							if k != "accept" {
								plain.headers[k] = val
							}
						}
						s2, h2, b2 := v.do(t, servers[server], plain)
						same := uuidRE.ReplaceAll(b2, nil)
						if s2 != status || !bytes.Equal(same, uuidRE.ReplaceAll(body, nil)) || h2.Get("Content-Type") != h.Get("Content-Type") {
							t.Errorf("JSON answer differs from the Accept-less one: %d %s vs %d %s", status, body, s2, b2)
						}
					}
				})
			}
		})
	}
}

// checkOutcome holds a client's answer, seen through via, to want. nginx
// answers a redirect as 401 with X-Svc-Login, and non-401/403 statuses as
// 403 with X-Svc-Status; its nginx.conf does the rest.
func checkOutcome(t *testing.T, via string, want outcome, status int, h http.Header, body []byte) {
	t.Helper()
	wantStatus := want.status
	if via == "nginx" {
		switch {
		case want.kind == "redirect":
			wantStatus = http.StatusUnauthorized
		case want.status != http.StatusOK && want.status != http.StatusUnauthorized && want.status != http.StatusForbidden:
			wantStatus = http.StatusForbidden
		}
	}
	if status != wantStatus {
		t.Fatalf("status %d, want %d; headers %v body %s", status, wantStatus, h, body)
	}
	if want.kind == "allow" {
		return
	}
	ct := h.Get("Content-Type")
	switch want.kind {
	case "json":
		var d DenyBody
		if ct != "application/json" || jsonUnmarshal(body, &d) != nil || d.Reason != want.reason {
			t.Errorf("want the JSON body with reason %s; got %s %s", want.reason, ct, body)
		}
		if h.Get("Location") != "" || h.Get(HeaderLogin) != "" || h.Get(headerContentType) != "" {
			t.Errorf("JSON answer carries Location %q / X-Svc-Login %q / X-Svc-Content-Type %q",
				h.Get("Location"), h.Get(HeaderLogin), h.Get(headerContentType))
		}
		return
	}
	if ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q, want the HTML page", ct)
	}
	if h.Get("Content-Security-Policy") == "" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("page headers missing: %v", h)
	}
	page := string(body)
	if !strings.HasPrefix(page, "<!doctype html>") || !strings.Contains(page, "<code>"+want.reason+"</code>") {
		t.Errorf("page lacks the reason %s: %s", want.reason, page)
	}
	if want.reason == "policy-deny" && !strings.Contains(page, "<dt>Why</dt><dd><code>") {
		t.Errorf("a policy denial's page does not say why: %s", page)
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") || strings.Contains(page, "<script") {
		t.Errorf("page is not self-contained: %s", page)
	}
	link := strings.ReplaceAll(want.location, "&", "&amp;")
	if want.location != "" && !strings.Contains(page, `href="`+link+`"`) {
		t.Errorf("page lacks the sign-in link %q: %s", want.location, page)
	}
	if want.location == "" && strings.Contains(page, "href=") {
		t.Errorf("page offers a link: %s", page)
	}
	if via == "nginx" {
		if h.Get(headerContentType) != "text/html; charset=utf-8" || h.Get(HeaderBody) != page {
			t.Errorf("nginx headers: X-Svc-Content-Type %q, X-Svc-Body %q", h.Get(headerContentType), h.Get(HeaderBody))
		}
	}
	switch {
	case want.kind == "redirect" && via == "nginx":
		if h.Get(HeaderLogin) != want.location || h.Get("Location") != "" {
			t.Errorf("X-Svc-Login %q Location %q, want X-Svc-Login %q", h.Get(HeaderLogin), h.Get("Location"), want.location)
		}
	case want.kind == "redirect":
		if h.Get("Location") != want.location {
			t.Errorf("Location %q, want %q", h.Get("Location"), want.location)
		}
	default:
		if h.Get("Location") != "" || h.Get(HeaderLogin) != "" {
			t.Errorf("a page that is no redirect carries Location %q X-Svc-Login %q", h.Get("Location"), h.Get(HeaderLogin))
		}
	}
}

// TestBrowserPageOtherStatuses: 429, 500 and 400 are pages for browsers
// too, with their headers, and JSON for everyone else.
func TestBrowserPageOtherStatuses(t *testing.T) {
	idp := newTestIdP(t)
	servers := browserServers(t, idp)
	admin := idp.token(t, map[string]any{"sub": "u-admin", "tenant_id": testTenant, "roles": []string{"admin"}})
	cookie := "svc_session=" + admin
	mux := http.NewServeMux()
	servers["saml-limited"].RegisterHTTP(mux)
	get := func(accept string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/check", nil)
		req.Header.Set("X-Forwarded-Uri", "/api/orders/1")
		req.Header.Set("X-Forwarded-Method", "GET")
		req.Header.Set("Cookie", cookie)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w
	}
	if w := get(acceptChrome); w.Code != http.StatusOK {
		t.Fatalf("first request: %d %s", w.Code, w.Body)
	}
	w := get(acceptChrome)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" ||
		w.Header().Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(w.Body.String(), "try again in") {
		t.Errorf("browser 429: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if w := get("application/json"); w.Code != http.StatusTooManyRequests || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("API 429: %d %v %s", w.Code, w.Header(), w.Body)
	}
	// An unreadable check request (no original URI) is a 400 page.
	req := httptest.NewRequest("GET", "/check", nil)
	req.Header.Set("Accept", acceptChrome)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "<code>input-invalid</code>") {
		t.Errorf("browser 400: %d %s", rec.Code, rec.Body)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
