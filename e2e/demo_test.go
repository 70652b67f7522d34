package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/demo/traffic"
	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

// demoMesh is the local mesh demo run as processes: the demo's OpenID
// provider on its shipped configuration, the sidecar on the demo's
// svc.toml, the orders and billing services, and nginx as the front proxy
// in Envoy's place, on deploy/demo/nginx.conf (the demo without Docker).
type demoMesh struct {
	idp     *harness.IDP
	sidecar *harness.Sidecar
	front   *harness.Proxy
	idpFile string
}

// startDemoMesh starts the demo's processes. frontAddr is the front
// proxy's address, "" for a free one; extraEnv is added to the sidecar's
// environment, and its SVC_SAML_ADDR is where the front proxy sends
// /auth/saml/.
func startDemoMesh(t *testing.T, policyDir, frontAddr string, extraEnv map[string]string) demoMesh {
	t.Helper()
	return startDemoMeshWith(t, demoOptions{policyDir: policyDir, frontAddr: frontAddr, env: extraEnv})
}

// demoOptions changes how startDemoMeshWith runs the demo.
type demoOptions struct {
	// policyDir replaces the default policy; "" keeps it.
	policyDir string
	// frontAddr is the front proxy's address, "" for a free one.
	frontAddr string
	// env is added to the sidecar's environment; its SVC_SAML_ADDR is
	// where the front proxy sends /auth/saml/.
	env map[string]string
	// caddy puts Caddy on the shipped deploy/caddy/Caddyfile in front, its
	// one application being the orders service, instead of nginx on
	// deploy/demo/nginx.conf.
	caddy bool
	// config, when set, edits deploy/demo/svc.toml before the sidecar
	// reads it.
	config func(string) string
	// samlOnly removes [sdk.oidc] from the demo's svc.toml: sign-in is
	// SAML's alone, and browsers go straight to the SAML IdP.
	samlOnly bool
}

// startDemoMeshWith starts the demo's processes as opts says.
func startDemoMeshWith(t *testing.T, opts demoOptions) demoMesh {
	t.Helper()
	root := harness.ModuleRoot(t)
	frontAddr := opts.frontAddr
	if frontAddr == "" {
		frontAddr = harness.FreeAddr(t)
	}
	m := demoMesh{idpFile: filepath.Join(root, "deploy", "demo", "idp.json")}
	m.idp = startDemoIDP(t, m.idpFile, frontAddr)
	toml, err := os.ReadFile(filepath.Join(root, "deploy", "demo", "svc.toml"))
	if err != nil {
		t.Fatal(err)
	}
	conf := string(toml)
	if opts.config != nil {
		conf = opts.config(conf)
	}
	env := demoSignInEnv(t, root)
	for k, v := range map[string]string{
		// The demo's values for the variables docker-compose.yml sets;
		// the addresses are the harness's free loopback ports, and the
		// provider's issuer is where it listens.
		"SVC_FAIL_MODE":         "closed",
		"SVC_JWKS_URL":          m.idp.JWKSURL,
		"SVC_JWT_ISSUER":        m.idp.Issuer,
		"SVC_OIDC_ISSUER_URL":   m.idp.Issuer,
		"SVC_OIDC_REDIRECT_URL": "http://" + frontAddr + "/auth/oidc/callback",
		"SVC_TENANT_ID":         "",
		"SVC_ADMIN_TOKEN_FILE":  filepath.Join(root, "deploy", "demo", "admin-token"),
	} {
		env[k] = v
	}
	if opts.samlOnly {
		conf = withoutTable(t, conf, "sdk.oidc")
		for k := range env {
			if strings.HasPrefix(k, "SVC_OIDC_") {
				delete(env, k)
			}
		}
	}
	if opts.policyDir != "" {
		env["SVC_POLICY_DIR"] = opts.policyDir
	}
	for k, v := range opts.env {
		env[k] = v
	}
	m.sidecar = harness.StartSidecar(t, harness.SidecarOptions{Config: conf, Env: env})
	samlAddr := env["SVC_SAML_ADDR"]
	services := map[string]string{}
	for _, svc := range []struct{ name, resource string }{{"orders", "orders"}, {"billing", "invoices"}} {
		addr := harness.FreeAddr(t)
		cmd := exec.Command(harness.Binary(t, "svc-demo"), "service", "--name", svc.name, "--resource", svc.resource, "--addr", addr, "--trust-proxy-headers")
		p := harness.StartProcess(t, svc.name, cmd)
		waitHealthy(t, p, "http://"+addr+"/healthz")
		t.Cleanup(func() {
			if code := p.Stop(t); code != 0 {
				t.Errorf("%s exited %d on SIGTERM", svc.name, code)
			}
		})
		services[svc.name] = addr
	}
	if opts.caddy {
		// deploy/caddy/Caddyfile's addresses are its comment's; here they
		// are the harness's free ports, the application being orders.
		m.front = startDemoCaddy(t, filepath.Join(root, "deploy", "caddy", "Caddyfile"), frontAddr, map[string]string{
			"127.0.0.1:7700": m.sidecar.HTTPAddr,
			"127.0.0.1:7701": samlAddr,
			"127.0.0.1:5678": services["orders"],
		})
		return m
	}
	// deploy/demo/nginx.conf's addresses are docker-compose.yml's ports on
	// loopback; here they are the harness's free ports.
	m.front = startDemoNginx(t, filepath.Join(root, "deploy", "demo", "nginx.conf"), map[string]string{
		"127.0.0.1:8080": frontAddr,
		"127.0.0.1:7700": m.sidecar.HTTPAddr,
		"127.0.0.1:7701": samlAddr,
		"127.0.0.1:8081": services["orders"],
		"127.0.0.1:8082": services["billing"],
	})
	return m
}

// demoSignInEnv points the sign-in of the demo's svc.toml at this
// machine: the sign-in listener on a free port, the demo's session key
// and OpenID Connect client secret from the repository
// (docker-compose.yml mounts them at /etc/svc), and no SAML IdP (a closed
// port) unless the test starts one.
func demoSignInEnv(t *testing.T, root string) map[string]string {
	return map[string]string{
		"SVC_SAML_ADDR":                      harness.FreeAddr(t),
		"SVC_SESSION_TOKEN_SIGNING_KEY_FILE": filepath.Join(root, "deploy", "demo", "saml-token-key.pem"),
		"SVC_OIDC_CLIENT_SECRET_FILE":        filepath.Join(root, "deploy", "demo", "oidc-client-secret"),
		"SVC_SAML_IDP_METADATA_URL":          "http://" + harness.FreeAddr(t) + "/metadata",
	}
}

// startDemoIDP runs the demo's OpenID provider on deploy/demo/idp.json
// moved to this machine: a free loopback port, the issuer where it
// listens, and its sign-in client redirecting to the front proxy at
// frontAddr instead of localhost:8080.
func startDemoIDP(t *testing.T, file, frontAddr string) *harness.IDP {
	t.Helper()
	addr := harness.FreeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	return harness.StartIDPConfigFileWith(t, file, func(cfg map[string]any) {
		cfg["host"], cfg["issuer"] = host, "http://"+addr
		cfg["port"], _ = strconv.Atoi(port)
		const site = "http://localhost:8080/"
		moved := false
		for _, c := range cfg["clients"].([]any) {
			uris, _ := c.(map[string]any)["redirect_uris"].([]any)
			for i, u := range uris {
				if s, _ := u.(string); strings.HasPrefix(s, site) {
					uris[i], moved = "http://"+frontAddr+"/"+strings.TrimPrefix(s, site), true
				}
			}
		}
		if !moved {
			t.Fatalf("%s redirects no sign-in to %s", file, site)
		}
	})
}

// withoutTable returns the TOML text conf without its table [name] (up to
// the next table header).
func withoutTable(t *testing.T, conf, name string) string {
	t.Helper()
	start := strings.Index(conf, "\n["+name+"]\n")
	if start < 0 {
		t.Fatalf("the configuration has no [%s]", name)
	}
	rest := conf[start+1:]
	end := strings.Index(rest[1:], "\n[")
	if end < 0 {
		return conf[:start+1]
	}
	return conf[:start+1] + rest[end+2:]
}

// swapAddrs returns the shipped file with each of its loopback addresses
// replaced as addrs says; every one must be in the file.
func swapAddrs(t *testing.T, file string, addrs map[string]string) string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(raw)
	for from, to := range addrs {
		if !strings.Contains(conf, from) {
			t.Fatalf("%s does not mention %q", file, from)
		}
		conf = strings.ReplaceAll(conf, from, to)
	}
	return conf
}

// startDemoNginx runs nginx on the demo's configuration with each of its
// loopback addresses replaced as addrs says; every one must be in the file.
func startDemoNginx(t *testing.T, file string, addrs map[string]string) *harness.Proxy {
	t.Helper()
	bin := harness.LookPath(t, "nginx", "nginx", "/usr/sbin/nginx")
	dir := t.TempDir()
	path := harness.WriteFile(t, dir, "nginx.conf", swapAddrs(t, file, addrs))
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", "stderr", "-g", "daemon off;")
	p := harness.StartProcess(t, "nginx", cmd)
	front := addrs["127.0.0.1:8080"]
	harness.WaitListening(t, p, front, 30*time.Second)
	return &harness.Proxy{Process: p, URL: "http://" + front, Dir: dir}
}

// startDemoCaddy runs Caddy on a shipped Caddyfile listening on front
// (plain http), with each of its loopback addresses replaced as addrs
// says; every one must be in the file.
func startDemoCaddy(t *testing.T, file, front string, addrs map[string]string) *harness.Proxy {
	t.Helper()
	bin := harness.LookPath(t, "caddy", "caddy")
	addrs = maps.Clone(addrs)
	addrs["\n{$SVC_PROXY_LISTEN::8080} {"] = "\nhttp://" + front + " {"
	dir := t.TempDir()
	path := harness.WriteFile(t, dir, "Caddyfile", swapAddrs(t, file, addrs))
	cmd := exec.Command(bin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_DATA_HOME="+filepath.Join(dir, "data"))
	p := harness.StartProcess(t, "caddy", cmd)
	harness.WaitListening(t, p, front, 30*time.Second)
	return &harness.Proxy{Process: p, URL: "http://" + front, Dir: dir}
}

func waitHealthy(t *testing.T, p *harness.Process, url string) {
	t.Helper()
	testkit.EventuallyWithin(t, 20*time.Second, fmt.Sprintf("%s: %s to answer 200", p.Name, url), func() bool {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-p.Done():
			t.Fatalf("%s exited: %s", p.Name, p.Stderr.String())
		default:
		}
		return false
	})
}

// runTraffic runs the demo's traffic generator for rounds rounds and
// returns its exit code and report.
func (m demoMesh) runTraffic(t *testing.T, rounds int) (int, traffic.Report) {
	t.Helper()
	cmd := exec.Command(harness.Binary(t, "svc-demo"), "traffic",
		"--target", m.front.URL, "--token-url", m.idp.TokenURL, "--idp-config", m.idpFile,
		"--rate", "100", "--rounds", strconv.Itoa(rounds), "--wait-ready", "20s")
	p := harness.StartProcess(t, "traffic", cmd)
	code := p.Wait(t, 60*time.Second)
	var r traffic.Report
	if err := json.Unmarshal([]byte(p.Stdout.String()), &r); err != nil {
		t.Fatalf("traffic report %q: %v\n%s", p.Stdout.String(), err, p.Stderr.String())
	}
	return code, r
}

// TestDemoTraffic runs every process of the local mesh demo but Envoy and
// the telemetry back ends: the generator's whole mix gets the answers the
// demo documents, and the sidecar records each kind with its reason.
func TestDemoTraffic(t *testing.T) {
	m := startDemoMesh(t, "", "", nil)
	const rounds = 3
	code, r := m.runTraffic(t, rounds)
	if code != 0 || r.Unexpected != 0 || r.Errors != 0 {
		t.Fatalf("traffic exited %d: %+v", code, r)
	}
	kinds := map[string]int{}
	for _, s := range traffic.Scenarios {
		c := r.Scenarios[s.Name]
		if c == nil || c.Expected != rounds {
			t.Errorf("scenario %s: %+v, want %d expected answers", s.Name, c, rounds)
			continue
		}
		kinds[s.Kind] += c.Expected
	}
	for _, k := range []string{traffic.KindAllowed, traffic.KindPolicyDenied, traffic.KindInvalidToken, traffic.KindOtherTenant} {
		if kinds[k] == 0 {
			t.Errorf("no %s traffic", k)
		}
	}

	// The audit log has the decisions behind those answers, and the one
	// allowed request of the generator's readiness wait.
	var allow, roleForbidden, mismatch, invalid int
	for _, rec := range auditRecords(t, m.sidecar, (4+2+1+3)*rounds+1) {
		reasons, _ := json.Marshal(rec["deny_reasons"])
		switch {
		case rec["allow"] == true:
			allow++
		case strings.Contains(string(reasons), "role-forbidden"):
			roleForbidden++
		case strings.Contains(string(reasons), "tenant-mismatch"):
			mismatch++
		case rec["reason"] != "policy-deny":
			invalid++
		}
	}
	if allow != 4*rounds+1 || roleForbidden != 2*rounds || mismatch != rounds || invalid != 3*rounds {
		t.Errorf("audit: %d allowed, %d role-forbidden, %d tenant-mismatch, %d token failures; want %d, %d, %d, %d",
			allow, roleForbidden, mismatch, invalid, 4*rounds+1, 2*rounds, rounds, 3*rounds)
	}

	// The walkthrough of docs/demo.md, steps 1 and 2, gets the answers it shows.
	checkReadmeWalkthrough(t, m)
}

// auditRecords waits for the sidecar to have written n audit records
// (writing is asynchronous) and returns them.
func auditRecords(t *testing.T, s *harness.Sidecar, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs := s.AuditRecords(t)
		if len(recs) >= n || time.Now().After(deadline) {
			return recs
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDemoCandidatePolicy enforces the candidate policy shipped for the
// dry-run walkthrough on the same traffic: exactly the viewer's invoice
// reads change, to denials.
func TestDemoCandidatePolicy(t *testing.T) {
	m := startDemoMesh(t, filepath.Join(harness.ModuleRoot(t), "deploy", "demo", "candidate-policy"), "", nil)
	code, r := m.runTraffic(t, 1)
	if code != 1 {
		t.Fatalf("traffic exited %d, want 1 (answers differ from the default policy's): %+v", code, r)
	}
	for _, s := range traffic.Scenarios {
		c := r.Scenarios[s.Name]
		wantUnexpected := 0
		if s.Name == "viewer-reads-invoice" {
			wantUnexpected = 1
		}
		if c.Unexpected != wantUnexpected || c.Errors != 0 {
			t.Errorf("scenario %s: %+v, want %d unexpected", s.Name, c, wantUnexpected)
		}
	}
	var restricted int
	for _, rec := range auditRecords(t, m.sidecar, len(traffic.Scenarios)+1) {
		reasons, _ := json.Marshal(rec["deny_reasons"])
		if strings.Contains(string(reasons), "restricted-resource: invoices") {
			restricted++
		}
	}
	if restricted != 1 {
		t.Errorf("%d denials with restricted-resource: invoices, want 1", restricted)
	}
}

// TestDemoServiceSDK runs the demo service as the Kubernetes base does:
// alone, asking the sidecar through the Go SDK.
func TestDemoServiceSDK(t *testing.T) {
	root := harness.ModuleRoot(t)
	idp := harness.StartIDPConfigFile(t, filepath.Join(root, "deploy", "demo", "idp.json"), harness.FreeAddr(t))
	toml, err := os.ReadFile(filepath.Join(root, "deploy", "demo", "svc.toml"))
	if err != nil {
		t.Fatal(err)
	}
	env := demoSignInEnv(t, root)
	env["SVC_JWKS_URL"], env["SVC_TENANT_ID"], env["SVC_ADMIN_TOKEN_FILE"] = idp.JWKSURL, "", filepath.Join(root, "deploy", "demo", "admin-token")
	sc := harness.StartSidecar(t, harness.SidecarOptions{Config: string(toml), Env: env})
	addr := harness.FreeAddr(t)
	p := harness.StartProcess(t, "orders", exec.Command(harness.Binary(t, "svc-demo"), "service", "--name", "orders", "--addr", addr, "--sidecar", sc.GRPCAddr))
	waitHealthy(t, p, "http://"+addr+"/healthz")
	viewer := idp.Token(t, "demo-viewer")
	tests := []struct {
		name, method, bearer string
		want                 int
		wantBody             string
	}{
		{"read", "GET", viewer, 200, `"subject":"demo-viewer"`},
		{"delete denied with reasons", "DELETE", viewer, 403, "role-forbidden: viewer cannot orders:delete"},
		{"no token", "GET", "", 401, ""},
		{"other tenant", "GET", idp.Token(t, "other-admin"), 403, "tenant-mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, "http://"+addr+"/orders/5", nil)
			if tt.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+tt.bearer)
			}
			status, h, body := harness.Do(t, req)
			if status != tt.want || !strings.Contains(string(body), tt.wantBody) {
				t.Fatalf("%s, want %d with %q", harness.Describe(status, h, body), tt.want, tt.wantBody)
			}
		})
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("orders exited %d on SIGTERM", code)
	}
}

// demoSAML is the demo with SAML sign-on, as the walkthrough's step 3
// runs it: the samlify IdP on deploy/demo/saml-users.json (default user
// dana), and the sidecar's SAML gateway, which the browser reaches through
// the front proxy's /auth/saml/ route without a check.
type demoSAML struct {
	demoMesh
	saml *harness.SAMLIdP
	// frontAddr is the front proxy's address, samlAddr the gateway's.
	frontAddr, samlAddr string
}

// startDemoSAML starts the demo with SAML sign-on; opts.env may add to or
// override the SAML settings.
func startDemoSAML(t *testing.T, opts demoOptions) demoSAML {
	t.Helper()
	key := keyOnlyIdP(t)
	d := demoSAML{samlAddr: harness.FreeAddr(t), frontAddr: opts.frontAddr}
	if d.frontAddr == "" {
		d.frontAddr = harness.FreeAddr(t)
	}
	users := filepath.Join(harness.ModuleRoot(t), "deploy", "demo", "saml-users.json")
	d.saml = harness.StartSAMLIdPArgs(t, key.KeyPEM, key.CertPEM, "http://"+d.samlAddr+"/auth/saml/metadata", "--users", users, "--user", "dana")
	env := map[string]string{
		"SVC_SAML_ADDR":             d.samlAddr,
		"SVC_SAML_ENTITY_ID":        "http://" + d.frontAddr + "/auth/saml/metadata",
		"SVC_SAML_ACS_URL":          "http://" + d.frontAddr + "/auth/saml/acs",
		"SVC_SAML_IDP_METADATA_URL": d.saml.MetadataURL,
	}
	maps.Copy(env, opts.env)
	opts.env, opts.frontAddr = env, d.frontAddr
	d.demoMesh = startDemoMeshWith(t, opts)
	return d
}

// TestDemoSAML signs the demo's SAML users in as the browser flow of the
// walkthrough does, with the samlify IdP on deploy/demo/saml-users.json:
// login redirect, the IdP's answer posted to the ACS, then the session
// cookie alone authorizes calls through the front proxy.
func TestDemoSAML(t *testing.T) {
	d := startDemoSAML(t, demoOptions{})
	m, idp, front := d.demoMesh, d.saml, d.frontAddr
	tests := []struct {
		user       string
		path       string
		want       int
		wantInBody string
	}{
		{"", "/orders/7", 200, `"subject":"dana@demo.example"`},
		{"bill", "/invoices/3", 200, `"subject":"bill@demo.example"`},
		{"olga", "/orders/7", 403, `"deny_reasons":["tenant-mismatch"]`},
		// No return_to: the sign-in lands on default_return_to, /home,
		// which every signed-in user of the tenant may read (the check
		// passes; the page is svc-demo's).
		{"bill", "", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.user+tt.path, func(t *testing.T) {
			login := m.front.URL + "/auth/saml/login"
			if tt.path != "" {
				login += "?return_to=" + url.QueryEscape(tt.path)
			}
			resp := samlLogin(t, noRedirect, login)
			loc := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, idp.BaseURL+"/sso?") {
				t.Fatalf("login: %d Location %q", resp.StatusCode, loc)
			}
			if tt.user != "" {
				loc += "&user=" + tt.user
			}
			acs := postACS(t, front, askIdP(t, loc))
			landing := tt.path
			if landing == "" {
				landing = "/home"
			}
			if acs.StatusCode != http.StatusSeeOther || acs.Header.Get("Location") != landing {
				t.Fatalf("ACS: %d Location %q code %q", acs.StatusCode, acs.Header.Get("Location"), refusalCode(t, acs))
			}
			cookie := sessionCookie(acs)
			req, _ := http.NewRequest(http.MethodGet, m.front.URL+landing, nil)
			if tt.want == 0 {
				req.Header.Set("Accept", browserAccept)
			}
			req.AddCookie(&http.Cookie{Name: "svc_session", Value: cookie})
			status, h, body := harness.Do(t, req)
			if tt.want == 0 {
				// Authorized: the answer is the service's, whatever it is.
				if status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusFound || status >= 500 {
					t.Fatalf("%s: %s, want the check to pass", landing, harness.Describe(status, h, body))
				}
				return
			}
			if status != tt.want || !strings.Contains(string(body), tt.wantInBody) {
				t.Fatalf("%s: %s, want %d with %q", tt.path, harness.Describe(status, h, body), tt.want, tt.wantInBody)
			}
		})
	}
}

// TestDemoBrowserSignIn: through the demo's nginx, a browser that opens a
// protected page without a session is sent to sign in and back to that
// page; an API client gets the JSON 401 as before. With both sign-ins
// configured (the demo's svc.toml) the browser goes to the OpenID Connect
// login, whose page offers both providers; with SAML alone, to the SAML
// login.
func TestDemoBrowserSignIn(t *testing.T) {
	for _, tc := range []struct {
		name     string
		samlOnly bool
		login    string
	}{
		{"OpenID Connect and SAML", false, "/auth/oidc/login"},
		{"SAML alone", true, "/auth/saml/login"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := startDemoMeshWith(t, demoOptions{samlOnly: tc.samlOnly})
			// A browser of its own: the shared one may hold another test's
			// session for this host.
			browser := newBrowser()
			get := func(path string) (*http.Response, string) {
				t.Helper()
				return getBody(t, browser, m.front.URL+path, "Accept", browserAccept)
			}
			for _, path := range []string{"/home", "/orders/7?expand=items"} {
				resp, _ := get(path)
				want := tc.login + "?return_to=" + url.QueryEscape(path)
				if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
					t.Errorf("browser GET %s: %d Location %q, want 302 to %s", path, resp.StatusCode, resp.Header.Get("Location"), want)
				}
			}
			if !tc.samlOnly {
				// The login offers both, each coming back to the page.
				resp, body := get("/auth/oidc/login?return_to=" + url.QueryEscape("/orders/7"))
				for _, want := range []string{
					`href="/auth/oidc/login?provider=default&amp;return_to=%2Forders%2F7">Sign in with OpenID Connect</a>`,
					`href="/auth/saml/login?return_to=%2Forders%2F7">Sign in with SAML single sign-on</a>`,
				} {
					if resp.StatusCode != http.StatusOK || !strings.Contains(body, want) {
						t.Errorf("login page: %s, want a link %s", harness.Describe(resp.StatusCode, resp.Header, []byte(body)), want)
					}
				}
			}
			for _, accept := range []string{"application/json", "*/*", ""} {
				req, _ := http.NewRequest(http.MethodGet, m.front.URL+"/orders/7", nil)
				if accept != "" {
					req.Header.Set("Accept", accept)
				}
				status, h, body := harness.Do(t, req)
				if status != http.StatusUnauthorized || h.Get("Content-Type") != "application/json" ||
					!strings.HasPrefix(string(body), `{"allow":false,"deny_reasons":[],"reason":"token-missing","decision_id":"`) {
					t.Errorf("Accept %q: %s, want the JSON 401", accept, harness.Describe(status, h, body))
				}
			}
		})
	}
}

// browserAccept is Chrome's Accept for a page.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"

// TestDemoDryRun is the walkthrough's last step: `core policy dry-run` of
// the shipped candidate policy while the demo's traffic flows reports the
// viewer's invoice reads as the only change.
func TestDemoDryRun(t *testing.T) {
	m := startDemoMesh(t, "", "", nil)
	candidate := filepath.Join(harness.ModuleRoot(t), "deploy", "demo", "candidate-policy")
	cmd := exec.Command(harness.Binary(t, "core"), "--sidecar", m.sidecar.URL(""), "policy", "dry-run", candidate, "--duration", "10m")
	core := harness.StartProcess(t, "core policy dry-run", cmd)
	if _, err := core.WaitOutput(t, true, 30*time.Second, func(s string) bool { return strings.Contains(s, "Ctrl-C ends it early") }); err != nil {
		t.Fatalf("dry-run did not start: %v\n%s", err, core.Stderr.String())
	}
	const rounds = 2
	if code, r := m.runTraffic(t, rounds); code != 0 {
		t.Fatalf("traffic exited %d: %+v", code, r)
	}
	// Ctrl-C ends the session once the traffic is done: its window holds
	// all of it however slow the machine, and the report follows.
	if err := core.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := core.Wait(t, 60*time.Second); code != 0 {
		t.Fatalf("core policy dry-run exited %d:\n%s\n%s", code, core.Stdout.String(), core.Stderr.String())
	}
	report := core.Stdout.String()
	t.Logf("report:\n%s", report)
	for _, want := range []string{
		"simulated deny",
		strconv.Itoa(rounds) + " restricted-resource: invoices",
		"would newly deny " + strconv.Itoa(rounds) + " invoices:read for tenant demo",
	} {
		if !strings.Contains(strings.Join(strings.Fields(report), " "), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(report, "newly allow") {
		t.Error("the candidate newly allows something")
	}
}
