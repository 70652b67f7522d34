package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/e2e/harness"
)

// TestOIDCDocsBlock runs the "local provider" block of docs/oidc.md as
// written: oidc-provider issues a token, and a sidecar that names only
// its issuer allows it. Only the fixed ports, /tmp and bin/ are swapped.
func TestOIDCDocsBlock(t *testing.T) {
	bash := harness.LookPath(t, "bash", "install bash")
	harness.LookPath(t, "curl", "apt-get install curl (scripts/test-packages.txt)")
	harness.LookPath(t, "node", "nodejs")
	root := harness.ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "e2e", "node_modules", "oidc-provider", "package.json")); err != nil {
		harness.Missing(t, "npm package oidc-provider", "run scripts/install-test-deps.sh, or npm ci in e2e/")
	}
	bin := filepath.Dir(harness.Binary(t, "svc-sidecar"))
	block := docsBlock(t, "oidc.md", "### Try it with a local provider")
	if !strings.HasPrefix(block, "make build\n") {
		t.Fatalf("the block no longer starts with make build:\n%s", block)
	}
	dir := t.TempDir()
	idp, grpcAddr, httpAddr := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	_, idpPort, err := net.SplitHostPort(idp)
	if err != nil {
		t.Fatal(err)
	}
	script := strings.NewReplacer(
		"make build\n", "",
		"./bin/", bin+"/",
		"node e2e/", "node "+filepath.Join(root, "e2e")+"/",
		"/tmp/svc-oidc", filepath.Join(dir, "svc-oidc"),
		`"port":9400`, `"port":`+idpPort,
		"127.0.0.1:9400", idp,
		"127.0.0.1:50071", grpcAddr,
		"127.0.0.1:7720", httpAddr,
		"localhost:7720", httpAddr,
	).Replace(block)
	for _, fixed := range []string{":9400", ":50071", ":7720", "/tmp/svc-oidc"} {
		if strings.Contains(script, fixed) {
			t.Fatalf("%s is still in the block after the swap:\n%s", fixed, script)
		}
	}
	out, err := runDocBlock(t, bash, "-uo pipefail", dir, harness.ChildEnv(nil), script, 2*time.Minute)
	if err != nil {
		t.Fatalf("the docs/oidc.md block failed: %v\n%s", err, out)
	}
	answersInOrder(t, "the docs/oidc.md block", string(out),
		`"allowed":true,"reason":"policy-allow".*"subject":"orders-viewer","tenant_id":"acme"`,
		`"jwks_issuers":\[\{"issuer":"http://`+idp+`","jwks_url":"http://`+idp+`/jwks"`,
	)
}
