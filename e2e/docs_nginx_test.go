package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/e2e/harness"
)

// The "Try it with nginx" block of docs/nginx-caddy.md works as written:
// the sidecar in development mode, the demo service as the application
// and nginx on the configuration core deploy nginx writes (the shipped
// deploy/nginx/nginx.conf for the default addresses). Only the fixed
// ports and paths are swapped for free ones, given to core deploy nginx
// as its flags, and the binaries are the ones the harness built.
func TestDocsNginxTryIt(t *testing.T) {
	bash := harness.LookPath(t, "bash", "install bash")
	nginx := harness.LookPath(t, "nginx", "apt-get install nginx (scripts/test-packages.txt)")
	harness.LookPath(t, "curl", "apt-get install curl (scripts/test-packages.txt)")
	bin := filepath.Dir(harness.Binary(t, "svc-sidecar"))
	harness.Binary(t, "svc-demo")
	harness.Binary(t, "core")
	dir := t.TempDir()
	front, httpAddr, app, saml := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)

	block := docsBlock(t, "nginx-caddy.md", "## Try it with nginx")
	if !strings.HasPrefix(block, "make build\n") {
		t.Fatalf("the block no longer starts with make build:\n%s", block)
	}
	script := strings.NewReplacer(
		"make build\n", "",
		"./bin/", bin+"/",
		"core deploy nginx ", "core deploy nginx --listen "+front+" --app "+app+" --sidecar "+httpAddr+" --signin "+saml+" ",
		"/tmp/svc-nginx", filepath.Join(dir, "prefix"),
		"localhost:8080", front,
		"localhost:7700", httpAddr,
		"127.0.0.1:5678", app,
		"\nnginx -p", "\n"+nginx+" -p",
	).Replace(block)

	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"SVC_HTTP_ADDR=" + httpAddr, "SVC_SIDECAR_ADDR=" + harness.FreeAddr(t), "SVC_SAML_ADDR=" + saml}
	out, err := runDocBlock(t, bash, "-uo pipefail", dir, env, script, 2*time.Minute)
	if err != nil {
		t.Fatalf("the docs/nginx-caddy.md block failed: %v\n%s", err, out)
	}
	s := string(out)
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
