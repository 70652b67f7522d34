package envoy

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/idtoken"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// uuidRE matches decision ids, which are random.
var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// dumpResponse renders status, headers (sorted, Date left out) and body
// with decision ids replaced, for golden comparison.
func dumpResponse(t *testing.T, resp *http.Response) string {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", resp.StatusCode)
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		if k != "Date" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range resp.Header[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	fmt.Fprintf(&b, "\n%s\n", body)
	return uuidRE.ReplaceAllString(b.String(), "<decision-id>")
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenFile(t, filepath.Join("testdata", "httpcheck", name+".golden"), got)
}

// httpCheckServers runs the HTTP check mode over real engines: "main"
// (verified tokens, fail closed), "limited" (one request a minute) and
// "broken" and "broken-open" (a policy that cannot decide, fail closed
// and open).
func httpCheckServers(t *testing.T, idp *testIdP) map[string]*httptest.Server {
	t.Helper()
	dir := t.TempDir()
	testkit.WriteFile(t, filepath.Join(dir, "authz.rego"), []byte(conflictPolicy))
	cfgs := map[string]config.Config{}
	cfgs["main"] = testConfig(idp, config.FailClosed)
	limited := testConfig(idp, config.FailClosed)
	limited.RateLimit.PerTenant = map[string]int{testTenant: 1}
	cfgs["limited"] = limited
	broken := testConfig(idp, config.FailClosed)
	broken.Policy.Dir = dir
	cfgs["broken"] = broken
	brokenOpen := testConfig(idp, config.FailOpen)
	brokenOpen.Policy.Dir = dir
	cfgs["broken-open"] = brokenOpen
	cfgs["identity"] = testConfig(idp, config.FailClosed)

	out := map[string]*httptest.Server{}
	for name, cfg := range cfgs {
		mux := http.NewServeMux()
		deps := Deps{Logger: quietLogger()}
		if name == "identity" { // hands out x-svc-identity
			m, err := idtoken.New(idtoken.Options{KeyFile: testkit.TokenKeyFile(t), TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			deps.Identity = m
		}
		s, err := New(cfg, newTestEngine(t, cfg, idp), deps)
		if err != nil {
			t.Fatal(err)
		}
		s.RegisterHTTP(mux)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		out[name] = srv
	}
	return out
}

func TestHTTPCheck(t *testing.T) {
	idp := newTestIdP(t)
	servers := httpCheckServers(t, idp)
	envoyOnly := testConfig(idp, config.FailClosed)
	envoyOnly.Sidecar.CheckProxy = config.CheckProxyEnvoy
	mux := http.NewServeMux()
	newTestServer(t, envoyOnly, newTestEngine(t, envoyOnly, idp)).RegisterHTTP(mux)
	servers["envoy-only"] = httptest.NewServer(mux)
	t.Cleanup(servers["envoy-only"].Close)
	admin := "Bearer " + idp.token(t, map[string]any{"sub": "u-admin", "tenant_id": testTenant, "roles": []string{"admin"}})
	viewer := "Bearer " + idp.token(t, map[string]any{"sub": "u-viewer", "tenant_id": testTenant, "role": "viewer"})
	nginx := func(method, uri string) map[string]string {
		return map[string]string{"X-Original-URI": uri, HeaderNginxMethod: method, "X-Forwarded-Host": "shop.example"}
	}
	caddy := func(method, uri string) map[string]string {
		return map[string]string{"X-Forwarded-Uri": uri, "X-Forwarded-Method": method, "X-Forwarded-Host": "shop.example"}
	}

	tests := []struct {
		name    string
		server  string
		method  string // of the check request itself
		path    string // of the check request itself
		auth    string
		headers map[string]string
	}{
		{name: "nginx-allow", method: "GET", path: "/check", auth: admin, headers: nginx("DELETE", "/api/orders/1?force=true")},
		{name: "nginx-policy-deny", method: "GET", path: "/check", auth: viewer, headers: nginx("DELETE", "/api/orders/1")},
		{name: "nginx-no-token", method: "GET", path: "/check", headers: nginx("GET", "/api/orders/1")},
		{name: "nginx-bad-token", method: "GET", path: "/check", auth: "Bearer x.y.z", headers: nginx("GET", "/api/orders/1")},
		{name: "nginx-unavailable", server: "broken", method: "GET", path: "/check", auth: admin, headers: nginx("GET", "/boom/1")},
		{name: "nginx-bad-path", method: "GET", path: "/check", auth: admin, headers: nginx("GET", "/api/%zz")},
		{name: "caddy-allow", method: "GET", path: "/check", auth: viewer, headers: caddy("GET", "/api/orders/1")},
		{name: "caddy-policy-deny", method: "GET", path: "/check", auth: viewer, headers: caddy("POST", "/api/orders")},
		{name: "caddy-no-token", method: "GET", path: "/check", headers: caddy("GET", "/api/orders")},
		{name: "caddy-unavailable", server: "broken", method: "GET", path: "/check", auth: admin, headers: caddy("GET", "/boom/1")},
		{name: "caddy-spoofed-original-uri", method: "GET", path: "/check", auth: viewer,
			headers: with(caddy("DELETE", "/api/orders/1"), "X-Original-URI", "/api/orders/1?ok")},
		{name: "caddy-spoofed-original-method", method: "GET", path: "/check", auth: viewer,
			headers: with(caddy("DELETE", "/api/orders/1"), "X-Original-URI", "/api/orders/1", HeaderNginxMethod, "GET")},
		{name: "check-without-original-uri", method: "GET", path: "/check", auth: admin},
		// nginx's own auth_request example: no method header of nginx's,
		// and a client's X-Original-Method is not one.
		{name: "nginx-without-original-method", method: "GET", path: "/check", auth: viewer,
			headers: map[string]string{"X-Original-URI": "/api/orders/1"}},
		{name: "nginx-client-original-method", method: "GET", path: "/check", auth: viewer,
			headers: map[string]string{"X-Original-URI": "/api/orders/1", "X-Original-Method": "GET"}},
		{name: "envoy-mode-check", server: "envoy-only", method: "GET", path: "/check", auth: admin, headers: nginx("GET", "/api/orders/1")},
		{name: "envoy-allow", method: "DELETE", path: "/check/envoy/api/orders/1?force=true", auth: admin,
			headers: map[string]string{"X-Svc-User-Id": "spoofed", "X-Svc-Admin": "1"}},
		{name: "envoy-policy-deny", method: "DELETE", path: "/check/envoy/api/orders/1", auth: viewer},
		{name: "envoy-no-token", method: "GET", path: "/check/envoy/api/orders/1"},
		{name: "envoy-root", method: "GET", path: "/check/envoy/", auth: viewer},
		{name: "envoy-unavailable", server: "broken", method: "GET", path: "/check/envoy/boom/1", auth: admin},
		{name: "envoy-fail-open", server: "broken-open", method: "GET", path: "/check/envoy/boom/1", auth: admin},
		{name: "nginx-fail-open", server: "broken-open", method: "GET", path: "/check", auth: admin, headers: nginx("GET", "/boom/1")},
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server := tt.server
			if server == "" {
				server = "main"
			}
			req, err := http.NewRequestWithContext(t.Context(), tt.method, servers[server].URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			golden(t, tt.name, dumpResponse(t, resp))
		})
	}
}

// TestHTTPCheckRateLimited checks the 429 in the three conventions: one
// request a minute, so every request after the first is limited.
func TestHTTPCheckRateLimited(t *testing.T) {
	idp := newTestIdP(t)
	srv := httpCheckServers(t, idp)["limited"]
	auth := "Bearer " + idp.token(t, map[string]any{"tenant_id": testTenant, "role": "admin"})
	do := func(t *testing.T, method, path string, headers map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", auth)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := do(t, "GET", "/check/envoy/api/orders/1", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: status %d", resp.StatusCode)
	}
	tests := []struct {
		name       string
		method     string
		path       string
		headers    map[string]string
		wantStatus int
		wantNginx  string // X-Svc-Status
	}{
		{"envoy", "GET", "/check/envoy/api/orders/1", nil, http.StatusTooManyRequests, ""},
		{"caddy", "GET", "/check", map[string]string{"X-Forwarded-Uri": "/api/orders/1", "X-Forwarded-Method": "GET"}, http.StatusTooManyRequests, ""},
		{"nginx", "GET", "/check", map[string]string{"X-Original-Uri": "/api/orders/1", HeaderNginxMethod: "GET"}, http.StatusForbidden, "429"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := do(t, tt.method, tt.path, tt.headers)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if got := resp.Header.Get(HeaderStatus); got != tt.wantNginx {
				t.Errorf("%s = %q, want %q", HeaderStatus, got, tt.wantNginx)
			}
			if ra := resp.Header.Get("Retry-After"); ra == "" {
				t.Error("no Retry-After")
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			const want = `{"allow":false,"deny_reasons":["rate-limited"],"reason":"rate-limited","decision_id":"<decision-id>"}`
			if got := regexp.MustCompile(`"decision_id":"[^"]+"`).ReplaceAllString(string(body), `"decision_id":"<decision-id>"`); got != want {
				t.Errorf("body = %s, want %s", body, want)
			}
		})
	}
}

// TestForwardedRequestTrust checks which headers name the original request
// per proxy: a method a client adds must never decide the action.
func TestForwardedRequestTrust(t *testing.T) {
	const (
		invalid   = "error input-invalid"
		untrusted = "error method-untrusted"
	)
	tests := []struct {
		name    string
		proxy   string
		method  string // of the check request itself
		headers map[string]string
		want    string // "METHOD target", or "error <reason>"
	}{
		// nginx's own auth_request example sets X-Original-URI only: the
		// method is unknown (the subrequest is always GET), so the check
		// is refused rather than judged as the GET, and a method header a
		// client can send (X-Original-Method) is never taken in its place.
		{"nginx conf without X_Svc_Method", config.CheckProxyAuto, "GET",
			map[string]string{"X-Original-URI": "/orders/1"}, untrusted},
		{"nginx mode without X_Svc_Method", config.CheckProxyNginx, "GET",
			map[string]string{"X-Original-URI": "/orders/1"}, untrusted},
		{"nginx: a client's X-Original-Method is not read", config.CheckProxyAuto, "GET",
			map[string]string{"X-Original-URI": "/orders/1", "X-Original-Method": "GET"}, untrusted},
		{"nginx mode: a client's X-Original-Method is not read", config.CheckProxyNginx, "DELETE",
			map[string]string{"X-Original-URI": "/orders/1", "X-Original-Method": "DELETE"}, untrusted},
		{"nginx: a client's X-Forwarded-Method is not a method", config.CheckProxyAuto, "GET",
			map[string]string{"X-Original-URI": "/orders/1", "X-Forwarded-Method": "GET"}, untrusted},
		{"nginx", config.CheckProxyAuto, "GET",
			map[string]string{"X-Original-URI": "/orders/1", HeaderNginxMethod: "DELETE"}, "DELETE /orders/1"},
		{"nginx: X-Original-Method does not override X_Svc_Method", config.CheckProxyAuto, "GET",
			map[string]string{"X-Original-URI": "/orders/1", HeaderNginxMethod: "DELETE", "X-Original-Method": "GET"}, "DELETE /orders/1"},
		{"nginx: the name as nginx writes it", config.CheckProxyNginx, "GET",
			map[string]string{"X-Original-URI": "/orders/1", "x_svc_method": "PUT"}, "PUT /orders/1"},
		{"nginx: a dashed X-Svc-Method is not the header", config.CheckProxyNginx, "GET",
			map[string]string{"X-Original-URI": "/orders/1", "X-Svc-Method": "GET"}, untrusted},
		{"nginx: a client's X-Forwarded-Method that agrees", config.CheckProxyAuto, "GET",
			map[string]string{"X-Original-URI": "/orders/1", HeaderNginxMethod: "GET", "X-Forwarded-Method": "GET"}, "GET /orders/1"},
		{"nginx: a client's X-Forwarded-Method that disagrees", config.CheckProxyNginx, "GET",
			map[string]string{"X-Original-URI": "/orders/1", HeaderNginxMethod: "DELETE", "X-Forwarded-Method": "GET"}, invalid},
		{"caddy", config.CheckProxyAuto, "GET",
			map[string]string{"X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "PUT"}, "PUT /orders/1"},
		{"caddy without method", config.CheckProxyAuto, "GET",
			map[string]string{"X-Forwarded-Uri": "/orders/1"}, invalid},
		{"caddy: a client's X-Original-Method is not read", config.CheckProxyAuto, "GET",
			map[string]string{"X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "DELETE", "X-Original-Method": "GET"}, "DELETE /orders/1"},
		{"caddy: a client's X_Svc_Method that disagrees", config.CheckProxyAuto, "GET",
			map[string]string{"X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "DELETE", HeaderNginxMethod: "GET"}, invalid},
		{"auto: the two URIs disagree", config.CheckProxyAuto, "GET",
			map[string]string{"X-Original-URI": "/public", "X-Forwarded-Uri": "/orders/1", HeaderNginxMethod: "GET"}, invalid},
		{"auto: the two methods disagree", config.CheckProxyAuto, "GET",
			map[string]string{"X-Original-URI": "/orders/1", HeaderNginxMethod: "GET", "X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "DELETE"}, invalid},
		{"auto: both URIs, no method", config.CheckProxyAuto, "GET",
			map[string]string{"X-Original-URI": "/orders/1", "X-Forwarded-Uri": "/orders/1"}, untrusted},
		// Caddy passes a client's X-Original-URI (and X_Svc_Method: Caddy
		// keeps underscores) on: auto takes it for nginx, and the DELETE
		// Caddy names is never judged as the GET.
		{"caddy: a client's X-Original-URI does not turn DELETE into the check's GET", config.CheckProxyAuto, "GET",
			map[string]string{"X-Original-URI": "/orders/1", "X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "DELETE"}, untrusted},
		{"caddy: nor with a client's X_Svc_Method", config.CheckProxyAuto, "GET",
			map[string]string{"X-Original-URI": "/orders/1", "X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "DELETE", HeaderNginxMethod: "GET"}, invalid},
		{"nginx: a client's X-Forwarded-Uri does not hide X_Svc_Method", config.CheckProxyAuto, "GET",
			map[string]string{"X-Original-URI": "/orders/1", HeaderNginxMethod: "POST", "X-Forwarded-Uri": "/orders/1"}, "POST /orders/1"},
		{"nginx mode ignores a client's X-Forwarded-Uri", config.CheckProxyNginx, "GET",
			map[string]string{"X-Original-URI": "/orders/1", HeaderNginxMethod: "PUT", "X-Forwarded-Uri": "/public"}, "PUT /orders/1"},
		{"nginx mode needs X-Original-URI", config.CheckProxyNginx, "GET",
			map[string]string{"X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "DELETE"}, invalid},
		{"forwarded mode ignores a client's X-Original-URI", config.CheckProxyForwarded, "GET",
			map[string]string{"X-Original-URI": "/public", "X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "DELETE"}, "DELETE /orders/1"},
		{"forwarded mode refuses an X_Svc_Method that disagrees", config.CheckProxyForwarded, "GET",
			map[string]string{HeaderNginxMethod: "GET", "X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "DELETE"}, invalid},
		{"forwarded mode without X-Forwarded-Method", config.CheckProxyForwarded, "DELETE",
			map[string]string{"X-Forwarded-Uri": "/orders/1"}, invalid},
		{"forwarded mode needs X-Forwarded-Uri", config.CheckProxyForwarded, "GET",
			map[string]string{"X-Original-URI": "/orders/1", HeaderNginxMethod: "GET"}, invalid},
		{"envoy mode refuses /check", config.CheckProxyEnvoy, "GET",
			map[string]string{"X-Original-URI": "/orders/1", HeaderNginxMethod: "GET"}, invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, CheckPath, nil)
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			pr, _, err := forwardedRequest(r, tt.proxy)
			got := "error " + string(reason.Of(err, "no reason"))
			if err == nil {
				got = pr.method + " " + pr.target
			}
			if got != tt.want {
				t.Fatalf("got %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

// TestSourceIP checks input.request.source_ip and that the forwarding
// headers a client can forge reach the policy only when trusted.
func TestSourceIP(t *testing.T) {
	xff := map[string]string{"x-forwarded-for": "6.6.6.6, 203.0.113.9", "forwarded": "for=6.6.6.6", "x-real-ip": "6.6.6.6", "x-tag": "a"}
	tests := []struct {
		name        string
		trust       bool
		pr          proxyRequest
		wantIP      string
		wantHeaders []string
	}{
		{"envoy peer, forwarding headers dropped", false,
			proxyRequest{method: "GET", target: "/orders", headers: xff, sourceIP: "198.51.100.4"}, "198.51.100.4", []string{"x-tag"}},
		{"envoy peer stays the peer when trusted", true,
			proxyRequest{method: "GET", target: "/orders", headers: xff, sourceIP: "198.51.100.4"}, "198.51.100.4", []string{"forwarded", "x-forwarded-for", "x-real-ip", "x-tag"}},
		{"http check: the proxy's address", false,
			proxyRequest{method: "GET", target: "/orders", headers: xff, sourceIP: "127.0.0.1", viaProxy: true}, "127.0.0.1", []string{"x-tag"}},
		{"http check trusted: the entry the proxy appended", true,
			proxyRequest{method: "GET", target: "/orders", headers: xff, sourceIP: "127.0.0.1", viaProxy: true}, "203.0.113.9", []string{"forwarded", "x-forwarded-for", "x-real-ip", "x-tag"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMapper(testTenant, nil)
			if err != nil {
				t.Fatal(err)
			}
			m.trustForwardedFor = tt.trust
			_, in, err := m.mapRequest(tt.pr)
			if err != nil {
				t.Fatal(err)
			}
			if in.Request.SourceIP != tt.wantIP {
				t.Errorf("source_ip = %q, want %q", in.Request.SourceIP, tt.wantIP)
			}
			var keys []string
			for k := range in.Request.Headers {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, tt.wantHeaders) {
				t.Errorf("headers = %q, want %q", keys, tt.wantHeaders)
			}
		})
	}
}
