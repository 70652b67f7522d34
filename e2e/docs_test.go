package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

// docsBlock returns the first ```sh block after the line that starts
// with marker in the page docs/<page>.
func docsBlock(t *testing.T, page, marker string) string {
	t.Helper()
	raw := repoFile(t, "docs", page)
	return shBlockAfter(t, string(raw), marker)
}

// docRun is a documented shell block about to run as written: bash,
// the folder of the binaries the harness built and a temporary folder to
// run it in.
type docRun struct {
	t       *testing.T
	bash    string
	bin     string
	dir     string
	timeout time.Duration
}

// newDocRun skips the test unless bash, curl and the programs in tools
// are there, and builds the binaries named (all in one folder).
func newDocRun(t *testing.T, tools []string, binaries ...string) *docRun {
	t.Helper()
	d := &docRun{t: t, bash: harness.LookPath(t, "bash", "install bash"), dir: t.TempDir(), timeout: 2 * time.Minute}
	harness.LookPath(t, "curl", "apt-get install curl (scripts/test-packages.txt)")
	for _, tool := range tools {
		harness.LookPath(t, tool, tool)
	}
	for _, b := range binaries {
		d.bin = filepath.Dir(harness.Binary(t, b))
	}
	return d
}

// buildBlock returns the block of docs/<page> after marker, which starts
// with make build, without that line and with ./bin/ as the harness's
// binaries; pairs swap the rest, and none of fixed may stay.
func (d *docRun) buildBlock(page, marker string, fixed []string, pairs ...string) string {
	d.t.Helper()
	block := docsBlock(d.t, page, marker)
	if !strings.HasPrefix(block, "make build\n") {
		d.t.Fatalf("the block no longer starts with make build:\n%s", block)
	}
	script := strings.NewReplacer(append([]string{"make build\n", "", "./bin/", d.bin + "/"}, pairs...)...).Replace(block)
	for _, f := range fixed {
		if strings.Contains(script, f) {
			d.t.Fatalf("%s is still in the block after the swap:\n%s", f, script)
		}
	}
	return script
}

// pathEnv is the environment of a block that finds the binaries on PATH,
// with HOME in its folder.
func (d *docRun) pathEnv(extra ...string) []string {
	return append([]string{"PATH=" + d.bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + d.dir}, extra...)
}

// run runs script with bash opts and env in the folder, fails the test
// when it fails, and returns its combined output.
func (d *docRun) run(what, opts string, env []string, script string) string {
	d.t.Helper()
	return d.runAt(what, opts, d.dir, env, script)
}

// runIn runs script as run does with -uo pipefail, in dir.
func (d *docRun) runIn(what, dir string, env []string, script string) string {
	d.t.Helper()
	return d.runAt(what, "-uo pipefail", dir, env, script)
}

func (d *docRun) runAt(what, opts, dir string, env []string, script string) string {
	d.t.Helper()
	out, err := runDocBlock(d.t, d.bash, opts, dir, env, script, d.timeout)
	if err != nil {
		d.t.Fatalf("%s failed: %v\n%s", what, err, out)
	}
	return string(out)
}

// sidecarBlock runs, with bash -euo pipefail and the binaries on PATH,
// the block of docs/<page> after marker, which starts a sidecar on the
// default ports: they are swapped for free ones, pairs swap the rest and
// env adds to the environment. It returns the block's combined output.
func (d *docRun) sidecarBlock(page, marker string, env []string, pairs ...string) string {
	d.t.Helper()
	grpcAddr, httpAddr := harness.FreeAddr(d.t), harness.FreeAddr(d.t)
	script := strings.NewReplacer(append(pairs, "127.0.0.1:7700", httpAddr)...).Replace(docsBlock(d.t, page, marker))
	env = append(env, "SVC_SIDECAR_ADDR="+grpcAddr, "SVC_HTTP_ADDR="+httpAddr)
	return d.run("the docs/"+page+" block", "-euo pipefail", d.pathEnv(env...), script)
}

// The local SAML round trip of docs/saml.md works as written: only the default
// ports are swapped for free ones.
func TestREADMESAMLRoundTrip(t *testing.T) {
	d := newDocRun(t, []string{"jq"}, "svc-sidecar", "core")
	d.timeout = 3 * time.Minute
	samlAddr := harness.FreeAddr(t)
	out := d.sidecarBlock("saml.md", "## Local round trip",
		[]string{"XDG_CONFIG_HOME=" + filepath.Join(d.dir, "config"), "SVC_SAML_ADDR=" + samlAddr},
		"127.0.0.1:7701", samlAddr)
	for _, want := range []string{`"allowed":true`, `"sub":"alice@example.com"`, `"roles":["admin"]`} {
		if !strings.Contains(out, want) {
			t.Errorf("validate-token answer lacks %s:\n%s", want, out)
		}
	}
	// The sidecar's log shares the output: the check's status is the one
	// line of three digits.
	var statuses []string
	for _, l := range strings.Split(out, "\n") {
		if len(l) == 3 && strings.Trim(l, "0123456789") == "" {
			statuses = append(statuses, l)
		}
	}
	if len(statuses) != 1 || statuses[0] != "200" {
		t.Errorf("check statuses %v, want [200] for the browser's cookie:\n%s", statuses, out)
	}
}

// runDocBlock runs a shell block of the docs with bash (options such as
// "-euo pipefail") in dir with env, in a process group of its own, so that
// whatever it starts in the background is stopped with it, whatever
// happens; it returns the block's combined output.
func runDocBlock(t *testing.T, bash, opts, dir string, env []string, script string, timeout time.Duration) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, append(strings.Fields(opts), "-c", script)...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	return cmd.CombinedOutput()
}

// answersInOrder fails the test unless out matches each pattern, each
// after the match of the one before: the answers a documented block shows,
// in its order.
func answersInOrder(t *testing.T, what, out string, patterns ...string) {
	t.Helper()
	rest := out
	for _, p := range patterns {
		loc := regexp.MustCompile(p).FindStringIndex(rest)
		if loc == nil {
			t.Fatalf("the answers of %s lack %s, in order:\n%s", what, p, out)
		}
		rest = rest[loc[1]:]
	}
}

// shBlockAfter returns the first sh code block after the line marker.
func shBlockAfter(t *testing.T, page, marker string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, "\n"+marker)
	if !ok {
		t.Fatalf("no line starting with %q", marker)
	}
	_, rest, ok = strings.Cut(rest, "\n```sh\n")
	if !ok {
		t.Fatalf("no sh block after %q", marker)
	}
	block, _, ok := strings.Cut(rest, "\n```\n")
	if !ok {
		t.Fatal("unterminated sh block")
	}
	return block
}

// The "Try it" block of docs/api-keys.md works as written, with the
// binaries the harness built; only the default ports are swapped for
// free ones.
func TestDocsAPIKeysTryIt(t *testing.T) {
	d := newDocRun(t, nil, "svc-sidecar", "core")
	out := d.sidecarBlock("api-keys.md", "## Try it", nil)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 5 || lines[0] != "200" || lines[1] != "403" || lines[len(lines)-1] != "revoked" {
		t.Fatalf("want 200, 403, the list and revoked:\n%s", out)
	}
	if !strings.Contains(out, "reporting") || strings.Contains(out, "sha256") {
		t.Errorf("the list does not show the key's subject, or shows its hash:\n%s", out)
	}
	if data, err := os.ReadFile(filepath.Join(d.dir, "api-keys.toml")); err != nil || !strings.Contains(string(data), "revoked = true") {
		t.Errorf("the key file is not revoked: %v\n%s", err, data)
	}
}

// The "Try it" block of docs/client-certs.md works as written: openssl
// makes the certificates, Debian's nginx verifies the client's and hands
// it to the sidecar, the demo service answers. Only the fixed ports are
// swapped for free ones, and the binaries are the ones the harness built.
func TestDocsClientCertsTryIt(t *testing.T) {
	nginx := harness.LookPath(t, "nginx", "apt-get install nginx (scripts/test-packages.txt)")
	d := newDocRun(t, []string{"openssl"}, "svc-sidecar", "svc-demo")
	httpAddr, front, app := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	frontPort := front[strings.LastIndexByte(front, ':')+1:]
	block := docsBlock(t, "client-certs.md", "## Try it")
	script := strings.NewReplacer(
		"127.0.0.1:7700", httpAddr,
		"127.0.0.1:8443", front,
		"localhost:8443", "localhost:"+frontPort,
		"127.0.0.1:5678", app,
		"\nnginx -p", "\n"+nginx+" -p",
	).Replace(block)
	for _, fixed := range []string{":7700", ":8443", ":5678"} {
		if strings.Contains(script, fixed) {
			t.Fatalf("%s is still in the block after the swap:\n%s", fixed, script)
		}
	}
	out := d.run("the docs/client-certs.md block", "-euo pipefail",
		d.pathEnv("SVC_SIDECAR_ADDR="+harness.FreeAddr(t), "SVC_HTTP_ADDR="+httpAddr), script)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("want the application's answer, 403, 401 and the check's refusal:\n%s", out)
	}
	if !strings.Contains(lines[0], `"subject":"spiffe://acme.example/ns/shop/sa/orders"`) || !strings.Contains(lines[0], `"tenant":"acme"`) {
		t.Errorf("the application did not answer the workload of acme: %s", lines[0])
	}
	if lines[1] != "403" || lines[2] != "401" || denyReason(lines[3]) != "client-cert-untrusted" {
		t.Errorf("want 403, 401 and client-cert-untrusted:\n%s", out)
	}
}

// The "Try it" block of docs/decision-logs.md works as written: records
// wait in the spool while NATS is down, and a sidecar started after a
// kill -9 ships what the killed one left. Only the default ports are
// swapped for free ones.
func TestDocsDecisionLogTryIt(t *testing.T) {
	d := newDocRun(t, []string{"nats-server", "jq"}, "svc-sidecar", "core")
	natsAddr := harness.FreeAddr(t)
	_, natsPort, _ := strings.Cut(natsAddr, ":")
	out := d.sidecarBlock("decision-logs.md", "## Try it", nil, "-p 4222", "-p "+natsPort, "127.0.0.1:4222", natsAddr)
	// Only the block's own lines: bash reports the killed job too.
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "shipped") || strings.HasPrefix(l, "unsent") {
			got = append(got, l)
		}
	}
	want := []string{"shipped 2", "unsent 3", "shipped 3 left by the killed sidecar"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("output %q, want the lines %q", out, want)
	}
}

// The "Replay" block of docs/decision-logs.md works as written, run from
// the module's root as it says: every line it shows after "# → " is in
// the output.
func TestDocsDecisionLogReplay(t *testing.T) {
	d := newDocRun(t, []string{"jq"}, "core")
	block := docsBlock(t, "decision-logs.md", "## Replay")
	script := strings.ReplaceAll(block, " policies/authz.rego", " "+filepath.Join(harness.ModuleRoot(t), "policies", "authz.rego"))
	out := d.run("the docs/decision-logs.md replay block", "-euo pipefail", d.pathEnv(), script)
	var shown int
	for _, l := range strings.Split(block, "\n") {
		if want, ok := strings.CutPrefix(l, "# → "); ok {
			shown++
			if !strings.Contains(out, strings.TrimSpace(want)) {
				t.Errorf("output has no line %q:\n%s", want, out)
			}
		}
	}
	if shown == 0 {
		t.Fatal("the block shows no output")
	}
}

// The "Try it" block of docs/identity-token.md works as written, with the
// binaries the harness built; only the default ports are swapped for
// free ones.
func TestDocsIdentityTokenTryIt(t *testing.T) {
	d := newDocRun(t, []string{"jq", "openssl"}, "svc-sidecar", "core")
	out := d.sidecarBlock("identity-token.md", "## Try it", nil)
	// jq's object, then the key set on one line.
	claimsText, jwksText, ok := strings.Cut(strings.TrimSpace(out), "\n}\n")
	if !ok {
		t.Fatalf("want the claims and the key set:\n%s", out)
	}
	var claims map[string]any
	if err := json.Unmarshal([]byte(claimsText+"}"), &claims); err != nil {
		t.Fatalf("claims: %v\n%s", err, out)
	}
	for k, want := range map[string]any{"iss": "svc-sidecar", "sub": "reporting", "aud": "orders.internal",
		"tenant_id": "acme", "kind": "api_key"} {
		if claims[k] != want {
			t.Errorf("claim %s = %v, want %v", k, claims[k], want)
		}
	}
	if claims["decision_id"] == "" || claims["exp"] == nil {
		t.Errorf("claims lack decision_id or exp: %v", claims)
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal([]byte(jwksText), &set); err != nil || len(set.Keys) != 1 || set.Keys[0]["alg"] != "ES256" {
		t.Errorf("key set %s: %v", jwksText, err)
	}
}

// The "Try it with nginx" block of docs/nginx-caddy.md works as written:
// the sidecar in development mode, the demo service as the application
// and nginx on the configuration core deploy nginx writes (the shipped
// deploy/nginx/nginx.conf for the default addresses). Only the fixed
// ports and paths are swapped for free ones, given to core deploy nginx
// as its flags, and the binaries are the ones the harness built.
func TestDocsNginxTryIt(t *testing.T) {
	nginx := harness.LookPath(t, "nginx", "apt-get install nginx (scripts/test-packages.txt)")
	d := newDocRun(t, nil, "svc-sidecar", "svc-demo", "core")
	front, httpAddr, app, saml := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	script := d.buildBlock("nginx-caddy.md", "## Try it with nginx", nil,
		"core deploy nginx ", "core deploy nginx --listen "+front+" --app "+app+" --sidecar "+httpAddr+" --signin "+saml+" ",
		"/tmp/svc-nginx", filepath.Join(d.dir, "prefix"),
		"localhost:8080", front,
		"localhost:7700", httpAddr,
		"127.0.0.1:5678", app,
		"\nnginx -p", "\n"+nginx+" -p",
	)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + d.dir,
		"SVC_HTTP_ADDR=" + httpAddr, "SVC_SIDECAR_ADDR=" + harness.FreeAddr(t), "SVC_SAML_ADDR=" + saml}
	s := d.run("the docs/nginx-caddy.md block", "-uo pipefail", env, script)
	i401, i403 := strings.Index(s, "HTTP/1.1 401"), strings.Index(s, "HTTP/1.1 403")
	i200 := strings.Index(s, "HTTP/1.1 200")
	i403b := strings.LastIndex(s, "HTTP/1.1 403")
	if i401 < 0 || i403 < i401 || i200 < i403 || i403b < i200 {
		t.Fatalf("want a 401, a 403, a 200 for the dev token and a 403 for its DELETE through nginx:\n%s", s)
	}
	if !strings.Contains(s[i200:i403b], "x-svc-user-id") && !strings.Contains(strings.ToLower(s[i200:i403b]), "dev-user") {
		t.Errorf("the application's answer does not show the dev user:\n%s", s[i200:i403b])
	}
	for _, want := range []string{`"reason":"token-missing"`, `"reason":"policy-deny"`, `"deny_reasons":["no-role"]`} {
		if !strings.Contains(s, want) {
			t.Errorf("the answers lack %s:\n%s", want, s)
		}
	}
}

// TestIntrospectionDocsBlock runs the "local provider" block of
// docs/introspection.md as written: oidc-provider issues an opaque token,
// and a sidecar that introspects it allows it. Only the fixed ports,
// /tmp and bin/ are swapped.
func TestIntrospectionDocsBlock(t *testing.T) {
	idp, out := runLocalProviderBlock(t, "introspection.md", "## Try it with a local provider", "9410", "50072", "7721", "/tmp/svc-introspect")
	answersInOrder(t, "the docs/introspection.md block", out,
		`opaque token: 4\d characters`,
		`"allowed":true,"reason":"policy-allow".*"subject":"orders-job","tenant_id":"acme"`,
		`"allowed":false.*"reason":"token-inactive"`,
		`"introspection":\{"url":"`+regexp.QuoteMeta("http://"+idp+"/token/introspection")+`","shared":false,"cache_entries":2,"calls":2,"failures":0\}`,
	)
}

// TestOIDCDocsBlock runs the "local provider" block of docs/oidc.md as
// written: oidc-provider issues a token, and a sidecar that names only
// its issuer allows it. Only the fixed ports, /tmp and bin/ are swapped.
func TestOIDCDocsBlock(t *testing.T) {
	idp, out := runLocalProviderBlock(t, "oidc.md", "### Try it with a local provider", "9400", "50071", "7720", "/tmp/svc-oidc")
	answersInOrder(t, "the docs/oidc.md block", out,
		`"allowed":true,"reason":"policy-allow".*"subject":"orders-viewer","tenant_id":"acme"`,
		`"jwks_issuers":\[\{"issuer":"http://`+idp+`","jwks_url":"http://`+idp+`/jwks"`,
	)
}

// runLocalProviderBlock runs the block of docs/<page> after marker, which
// starts the e2e suite's oidc-provider on port idpPort and a sidecar on
// grpcPort and httpPort, with its files in tmp: the ports are swapped for
// free ones, tmp for the test's folder and bin/ for the harness's
// binaries. It returns the provider's address and the block's output.
func runLocalProviderBlock(t *testing.T, page, marker, idpPort, grpcPort, httpPort, tmp string) (idp, out string) {
	t.Helper()
	d := newDocRun(t, []string{"node"}, "svc-sidecar")
	root := harness.ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "e2e", "node_modules", "oidc-provider", "package.json")); err != nil {
		harness.Missing(t, "npm package oidc-provider", "run scripts/install-test-deps.sh, or npm ci in e2e/")
	}
	idp, grpcAddr, httpAddr := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	_, freeIdPPort, err := net.SplitHostPort(idp)
	if err != nil {
		t.Fatal(err)
	}
	script := d.buildBlock(page, marker,
		[]string{":" + idpPort, ":" + grpcPort, ":" + httpPort, tmp},
		"node e2e/", "node "+filepath.Join(root, "e2e")+"/",
		tmp, filepath.Join(d.dir, filepath.Base(tmp)),
		`"port":`+idpPort, `"port":`+freeIdPPort,
		"127.0.0.1:"+idpPort, idp,
		"127.0.0.1:"+grpcPort, grpcAddr,
		"127.0.0.1:"+httpPort, httpAddr,
		"localhost:"+httpPort, httpAddr,
	)
	return idp, d.run("the docs/"+page+" block", "-uo pipefail", harness.ChildEnv(nil), script)
}
