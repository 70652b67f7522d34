package envoy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"
)

// These tests run the shipped deploy/nginx/nginx.conf and
// deploy/caddy/Caddyfile against the HTTP check mode on a real engine,
// with only the listen and upstream ports rewritten. They are skipped
// where nginx or caddy is not installed.

// echoApp answers with the request's x-svc-* headers as JSON, standing in
// for the protected application.
func echoApp(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := map[string]string{"path": r.URL.RequestURI(), "method": r.Method}
		for k, v := range r.Header {
			if strings.HasPrefix(strings.ToLower(k), HeaderPrefix) {
				got[strings.ToLower(k)] = strings.Join(v, ",")
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(got)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// proxyCase is one request through a proxy and what the client sees.
type proxyCase struct {
	name       string
	server     string // "main" (default), "limited", "broken"
	method     string
	path       string
	auth       string
	headers    map[string]string
	wantStatus int
	// wantApp: identity headers the app saw (allowed requests); nil means
	// the app must not have been reached.
	wantApp map[string]string
	// wantReason is the reason of the JSON deny body.
	wantReason string
	// wantHeader: response headers the client must see.
	wantHeader map[string]string
}

func proxyCases(t *testing.T, idp *testIdP) []proxyCase {
	admin := "Bearer " + idp.token(t, map[string]any{"sub": "u-admin", "tenant_id": testTenant, "roles": []string{"admin"}})
	viewer := "Bearer " + idp.token(t, map[string]any{"sub": "u-viewer", "tenant_id": testTenant, "role": "viewer"})
	return []proxyCase{
		{name: "allowed with identity, spoofed headers replaced", method: "DELETE", path: "/api/orders/1?x=1", auth: admin,
			headers:    map[string]string{"X-Svc-User-Id": "root", "X-Svc-Fail-Open": "true", "X-Original-URI": "/api/orders/1?x=1", "X-Svc-Identity": "forged"},
			wantStatus: 200,
			wantApp: map[string]string{"method": "DELETE", "path": "/api/orders/1?x=1",
				"x-svc-user-id": "u-admin", "x-svc-tenant-id": testTenant, "x-svc-roles": "admin", "x-svc-decision-id": "<set>",
				"x-svc-fail-open": "false"}},
		{name: "identity token replaces the client's", server: "identity", method: "GET", path: "/api/orders/1", auth: admin,
			headers:    map[string]string{"X-Svc-Identity": "forged"},
			wantStatus: 200,
			wantApp: map[string]string{"method": "GET", "path": "/api/orders/1",
				"x-svc-user-id": "u-admin", "x-svc-tenant-id": testTenant, "x-svc-roles": "admin", "x-svc-decision-id": "<set>",
				"x-svc-fail-open": "false", "x-svc-identity": "<jwt>"}},
		{name: "policy deny is 403", method: "DELETE", path: "/api/orders/1", auth: viewer,
			wantStatus: 403, wantReason: "policy-deny"},
		{name: "no token is 401", method: "GET", path: "/api/orders/1",
			wantStatus: 401, wantReason: "token-missing", wantHeader: map[string]string{"Www-Authenticate": "Bearer"}},
		{name: "bad token is 401", method: "GET", path: "/api/orders/1", auth: "Bearer a.b.c",
			wantStatus: 401, wantReason: "token-malformed",
			wantHeader: map[string]string{"Www-Authenticate": `Bearer error="invalid_token", error_description="token-malformed"`}},
		{name: "no decision is 500", server: "broken", method: "GET", path: "/boom/1", auth: admin,
			wantStatus: 500, wantReason: "policy-error"},
		// Fail open is for a sidecar that cannot be reached; one that
		// answered an evaluation error is a denial in every fail mode.
		{name: "no decision is 500 with fail mode open too", server: "broken-open", method: "GET", path: "/boom/1", auth: admin,
			headers:    map[string]string{"X-Svc-User-Id": "root"},
			wantStatus: 500, wantReason: "policy-error"},
		{name: "rate limited is 429", server: "limited", method: "GET", path: "/api/orders/1", auth: admin,
			wantStatus: 429, wantReason: "rate-limited", wantHeader: map[string]string{"Retry-After": "*"}},
		{name: "spoofed check headers refused", method: "DELETE", path: "/api/orders/1", auth: viewer,
			headers: map[string]string{"X-Forwarded-Uri": "/api/orders/1?safe", "X-Original-URI": "/api/orders/1?safe",
				"X-Forwarded-Method": "GET", "X-Original-Method": "GET", "X_Svc_Method": "GET"},
			wantStatus: 403, wantReason: "policy-deny"},
		// Caddy sets X-Forwarded-Uri and -Method and passes the client's
		// X-Original-URI on: the DELETE must not be judged as the GET of
		// the forward_auth request.
		{name: "client X-Original-URI alone keeps the method", method: "DELETE", path: "/api/orders/1", auth: viewer,
			headers:    map[string]string{"X-Original-URI": "/api/orders/1"},
			wantStatus: 403, wantReason: "policy-deny"},
		{name: "client X-Forwarded-Uri alone keeps the method", method: "DELETE", path: "/api/orders/1", auth: viewer,
			headers:    map[string]string{"X-Forwarded-Uri": "/api/orders/1"},
			wantStatus: 403, wantReason: "policy-deny"},
	}
}

// runProxyCases sends each case to the proxy at base; sidecars maps a
// server name to the proxy base URL that uses it.
func runProxyCases(t *testing.T, bases map[string]string, cases []proxyCase) {
	client := &http.Client{Timeout: 5 * time.Second}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			server := tc.server
			if server == "" {
				server = "main"
			}
			if server == "limited" { // spend the one request of the minute
				do(t, client, bases[server], tc).Body.Close()
			}
			resp := do(t, client, bases[server], tc)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tc.wantStatus, body)
			}
			for k, v := range tc.wantHeader {
				got := resp.Header.Values(k)
				if len(got) != 1 || v != "*" && got[0] != v {
					t.Errorf("header %s = %q, want one %q", k, got, v)
				}
			}
			if tc.wantApp != nil {
				var app map[string]string
				if err := json.Unmarshal(body, &app); err != nil {
					t.Fatalf("app body %s: %v", body, err)
				}
				if app["x-svc-decision-id"] != "" {
					app["x-svc-decision-id"] = "<set>"
				}
				if strings.Count(app["x-svc-identity"], ".") == 2 {
					app["x-svc-identity"] = "<jwt>"
				}
				for k, v := range app {
					if v == "" { // nginx drops empty headers, Caddy passes them
						delete(app, k)
					}
				}
				if fmt.Sprint(app) != fmt.Sprint(tc.wantApp) {
					t.Errorf("app saw %v, want %v", app, tc.wantApp)
				}
				return
			}
			var deny DenyBody
			if err := json.Unmarshal(body, &deny); err != nil {
				t.Fatalf("deny body %q: %v", body, err)
			}
			if deny.Allow || deny.Reason != tc.wantReason {
				t.Errorf("deny body %+v, want reason %s", deny, tc.wantReason)
			}
		})
	}
}

func do(t *testing.T, client *http.Client, base string, tc proxyCase) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), tc.method, base+tc.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tc.auth != "" {
		req.Header.Set("Authorization", tc.auth)
	}
	for k, v := range tc.headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// startProxy writes the shipped config with ports rewritten and runs
// the proxy until the test ends; it returns the base URL once it answers.
// A free port can be taken by another program before the proxy binds it:
// a proxy that exits saying so is started again on another port.
func startProxy(t *testing.T, bin string, args func(dir, conf string) []string, shipped, confName string, replace ...string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", shipped))
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		base, out, inUse := runProxy(t, bin, args, string(src), confName, replace)
		if base != "" {
			return base
		}
		if !inUse || attempt == 3 {
			t.Fatalf("%s did not listen:\n%s", bin, out)
		}
	}
}

// runProxy runs the proxy once on a free port. It returns the base URL
// once the proxy answers, or else what the proxy wrote and whether it
// found its port in use.
func runProxy(t *testing.T, bin string, args func(dir, conf string) []string, src, confName string, replace []string) (base, output string, inUse bool) {
	t.Helper()
	port := testkit.FreePort(t)
	text := strings.NewReplacer(append(replace, "8080", strconv.Itoa(port))...).Replace(src)
	dir := t.TempDir()
	conf := filepath.Join(dir, confName)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args(dir, conf)...)
	// The proxy runs in its own process group, so that stopping the test
	// stops its workers too; SIGTERM lets it shut down in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	var out bytes.Buffer // read only once the process has exited
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() string {
		cancel()
		<-exited
		return out.String()
	}
	base = "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 100*time.Millisecond); err == nil {
			c.Close()
			t.Cleanup(func() {
				if output := stop(); t.Failed() {
					t.Logf("%s output:\n%s", bin, output)
				}
			})
			return base, "", false
		}
		select {
		case <-exited:
			output = stop()
			// nginx says "Address already in use", Caddy "address already in use".
			return "", output, strings.Contains(strings.ToLower(output), "address already in use")
		case <-time.After(50 * time.Millisecond):
		}
	}
	output = stop()
	return "", output, false
}

func sidecarHTTPServers(t *testing.T, idp *testIdP) map[string]string {
	t.Helper()
	addrs := map[string]string{}
	for name, srv := range httpCheckServers(t, idp) {
		addrs[name] = strings.TrimPrefix(srv.URL, "http://")
	}
	return addrs
}

func TestShippedNginxConfig(t *testing.T) {
	bin := testkit.LookPath(t, "nginx", "nginx", "/usr/sbin/nginx")
	idp := newTestIdP(t)
	sidecars := sidecarHTTPServers(t, idp)
	app := strings.TrimPrefix(echoApp(t).URL, "http://")
	bases := map[string]string{}
	for name, addr := range sidecars {
		bases[name] = startProxy(t, bin, func(dir, conf string) []string {
			return []string{"-p", dir, "-c", conf, "-e", "stderr", "-g", "daemon off;"}
		}, "deploy/nginx/nginx.conf", "nginx.conf",
			"127.0.0.1:7700", addr, "127.0.0.1:5678", app, "/run/svc-nginx.pid", filepath.Join(t.TempDir(), "nginx.pid"))
	}
	runProxyCases(t, bases, proxyCases(t, idp))

	// nginx's own auth_request example sets X-Original-URI only. The
	// subrequest is a GET whatever the client sent, so the sidecar must
	// refuse rather than judge a viewer's DELETE as that GET, or as the
	// method the client names in X-Original-Method.
	t.Run("without X_Svc_Method", func(t *testing.T) {
		const setMethod = "proxy_set_header X_Svc_Method      $request_method;"
		raw, err := os.ReadFile(filepath.Join("..", "deploy", "nginx", "nginx.conf"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), setMethod) {
			t.Fatalf("the shipped nginx.conf does not hold %q", setMethod)
		}
		base := startProxy(t, bin, func(dir, conf string) []string {
			return []string{"-p", dir, "-c", conf, "-e", "stderr", "-g", "daemon off;"}
		}, "deploy/nginx/nginx.conf", "nginx.conf",
			"127.0.0.1:7700", sidecars["main"], "127.0.0.1:5678", app, "/run/svc-nginx.pid", filepath.Join(t.TempDir(), "nginx.pid"),
			setMethod, "")
		viewer := "Bearer " + idp.token(t, map[string]any{"sub": "u-viewer", "tenant_id": testTenant, "role": "viewer"})
		runProxyCases(t, map[string]string{"main": base}, []proxyCase{
			{name: "a viewer's DELETE is refused, not judged as the GET", method: "DELETE", path: "/api/orders/1", auth: viewer,
				wantStatus: 400, wantReason: "method-untrusted"},
			{name: "a viewer's DELETE naming GET in X-Original-Method is refused", method: "DELETE", path: "/api/orders/1", auth: viewer,
				headers: map[string]string{"X-Original-Method": "GET"}, wantStatus: 400, wantReason: "method-untrusted"},
			{name: "a GET is refused too: the method is unknown", method: "GET", path: "/api/orders/1", auth: viewer,
				wantStatus: 400, wantReason: "method-untrusted"},
		})
	})
}

// TestShippedNginxConfsSetTheMethod checks that every shipped nginx
// configuration names the original method to /check and drops the
// forwarded convention's headers, which nginx passes on from the client.
func TestShippedNginxConfsSetTheMethod(t *testing.T) {
	for _, path := range []string{"deploy/nginx/nginx.conf", "deploy/demo/nginx.conf"} {
		raw, err := os.ReadFile(filepath.Join("..", path))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"proxy_set_header X-Original-URI    $request_uri;",
			"proxy_set_header X_Svc_Method      $request_method;",
			`proxy_set_header X-Forwarded-Uri    "";`,
			`proxy_set_header X-Forwarded-Method "";`,
		} {
			if !strings.Contains(string(raw), want) {
				t.Errorf("%s does not hold %q", path, want)
			}
		}
	}
}

func TestShippedCaddyfile(t *testing.T) {
	bin := testkit.LookPath(t, "caddy", "caddy")
	idp := newTestIdP(t)
	sidecars := sidecarHTTPServers(t, idp)
	app := strings.TrimPrefix(echoApp(t).URL, "http://")
	bases := map[string]string{}
	for name, addr := range sidecars {
		bases[name] = startCaddy(t, bin, "127.0.0.1:7700", addr, "127.0.0.1:5678", app)
	}
	runProxyCases(t, bases, proxyCases(t, idp))

	// A bare forward_auth, as Caddy's documentation shows it, passes the
	// client's X-Original-* headers on to the check. The sidecar's default
	// auto mode then takes the check for nginx's, whose method only
	// X_Svc_Method names: without it the request is refused, never judged
	// as the GET of the check or a method the client names.
	t.Run("without header hygiene", func(t *testing.T) {
		base := startCaddy(t, bin, "127.0.0.1:7700", sidecars["main"], "127.0.0.1:5678", app,
			"request_header -X-Original-Uri", "", "request_header -X-Original-Method", "", "request_header -X_Svc_Method", "")
		var cases []proxyCase
		for _, c := range proxyCases(t, idp) {
			if c.server == "" && c.headers["X-Original-URI"] != "" && c.headers["X-Original-Method"] == "" {
				// The nginx convention's 400: 403 with X-Svc-Status,
				// which Caddy passes on as it is.
				c.wantStatus, c.wantReason, c.wantApp = http.StatusForbidden, "method-untrusted", nil
				cases = append(cases, c)
			}
		}
		viewer := "Bearer " + idp.token(t, map[string]any{"sub": "u-viewer", "tenant_id": testTenant, "role": "viewer"})
		cases = append(cases, proxyCase{name: "a client's X_Svc_Method does not turn DELETE into GET",
			method: "DELETE", path: "/api/orders/1", auth: viewer,
			headers:    map[string]string{"X-Original-URI": "/api/orders/1", "X_Svc_Method": "GET"},
			wantStatus: http.StatusForbidden, wantReason: "input-invalid"})
		if len(cases) < 2 {
			t.Fatalf("%d cases carry X-Original-URI, want at least 2", len(cases))
		}
		runProxyCases(t, map[string]string{"main": base}, cases)
	})
}

// TestShippedCaddyfileAddresses: the shipped Caddyfile takes its four
// addresses from the environment, with today's ports as defaults, as
// Caddy's own adapter reads it.
func TestShippedCaddyfileAddresses(t *testing.T) {
	bin := testkit.LookPath(t, "caddy", "caddy")
	adapt := func(env ...string) (listen []string, upstreams string) {
		t.Helper()
		cmd := exec.Command(bin, "adapt", "--config", filepath.Join("..", "deploy", "caddy", "Caddyfile"), "--adapter", "caddyfile")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("caddy adapt: %v", err)
		}
		var c struct {
			Apps struct {
				HTTP struct {
					Servers map[string]json.RawMessage `json:"servers"`
				} `json:"http"`
			} `json:"apps"`
		}
		if err := json.Unmarshal(out, &c); err != nil || len(c.Apps.HTTP.Servers) != 1 {
			t.Fatalf("caddy adapt answered %v, %d servers:\n%s", err, len(c.Apps.HTTP.Servers), out)
		}
		for _, raw := range c.Apps.HTTP.Servers {
			var srv struct{ Listen []string }
			_ = json.Unmarshal(raw, &srv)
			return srv.Listen, string(raw)
		}
		return nil, ""
	}
	tests := []struct {
		name   string
		env    []string
		listen string
		want   []string
	}{
		{"defaults", nil, ":8080", []string{`"127.0.0.1:5678"`, `"127.0.0.1:7700"`, `"127.0.0.1:7701"`}},
		{"from the environment", []string{"SVC_PROXY_LISTEN=:9090", "SVC_APP_ADDR=127.0.0.1:6001", "SVC_HTTP_ADDR=127.0.0.1:6002", "SVC_SAML_ADDR=127.0.0.1:6003"},
			":9090", []string{`"127.0.0.1:6001"`, `"127.0.0.1:6002"`, `"127.0.0.1:6003"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			listen, upstreams := adapt(tc.env...)
			if len(listen) != 1 || listen[0] != tc.listen {
				t.Errorf("listen = %v, want [%s]", listen, tc.listen)
			}
			for _, w := range tc.want {
				if !strings.Contains(upstreams, w) {
					t.Errorf("no upstream %s in %s", w, upstreams)
				}
			}
			if tc.env != nil && strings.Contains(upstreams, "127.0.0.1:7700") {
				t.Errorf("a default address stayed although the environment names another: %s", upstreams)
			}
		})
	}
}

// startCaddy runs caddy on the shipped Caddyfile changed by replace.
func startCaddy(t *testing.T, bin string, replace ...string) string {
	t.Helper()
	return startProxy(t, bin, func(_, conf string) []string {
		return []string{"run", "--config", conf, "--adapter", "caddyfile"}
	}, "deploy/caddy/Caddyfile", "Caddyfile", replace...)
}

// samlUpstream stands for the sidecar's SAML listener: it answers every
// request, so a 200 through the proxy shows the path was routed there
// without an authorization check.
func samlUpstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Saml-Upstream", r.URL.Path)
		_, _ = io.WriteString(w, "saml")
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// shippedProxy is a proxy configuration shipped in deploy/: the program,
// the shipped file, the name it is written under, the command line that
// runs it, and what its addresses and paths are replaced with beyond the
// common ones.
type shippedProxy struct {
	bin, shipped, conf string
	args               func(dir, conf string) []string
	extra              []string
}

// shippedProxies are nginx and Caddy as deploy/ ships them.
func shippedProxies(t *testing.T) []shippedProxy {
	return []shippedProxy{
		{"nginx", "deploy/nginx/nginx.conf", "nginx.conf", func(dir, conf string) []string {
			return []string{"-p", dir, "-c", conf, "-e", "stderr", "-g", "daemon off;"}
		}, []string{"/run/svc-nginx.pid", filepath.Join(t.TempDir(), "nginx.pid")}},
		{"caddy", "deploy/caddy/Caddyfile", "Caddyfile", func(_, conf string) []string {
			return []string{"run", "--config", conf, "--adapter", "caddyfile"}
		}, nil},
	}
}

func TestShippedProxiesRouteSAML(t *testing.T) {
	for _, p := range shippedProxies(t) {
		t.Run(p.bin, func(t *testing.T) {
			bin := testkit.LookPath(t, p.bin, p.bin, "/usr/sbin/"+p.bin)
			idp := newTestIdP(t)
			var sidecar string
			for _, addr := range sidecarHTTPServers(t, idp) {
				sidecar = addr
				break
			}
			app := strings.TrimPrefix(echoApp(t).URL, "http://")
			repl := append([]string{"127.0.0.1:7700", sidecar, "127.0.0.1:7701", samlUpstream(t), "127.0.0.1:5678", app}, p.extra...)
			base := startProxy(t, bin, p.args, p.shipped, p.conf, repl...)
			// SAML and OpenID Connect sign-in share the sign-in listener.
			for _, path := range []string{"/auth/saml/metadata", "/auth/oidc/login"} {
				resp, err := http.Get(base + path)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Saml-Upstream") != path {
					t.Fatalf("GET %s without a token: %d, upstream %q; want 200 from the sign-in listener", path, resp.StatusCode, resp.Header.Get("X-Saml-Upstream"))
				}
			}
			// The rest of the site still needs a token.
			resp, err := http.Get(base + "/orders/1")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET /orders/1 without a token: %d, want 401", resp.StatusCode)
			}
		})
	}
}
