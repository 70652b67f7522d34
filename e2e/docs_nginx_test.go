package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
)

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
