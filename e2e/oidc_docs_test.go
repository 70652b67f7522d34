package e2e

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/e2e/harness"
)

// TestOIDCDocsBlock runs the "local provider" block of docs/oidc.md as
// written: oidc-provider issues a token, and a sidecar that names only
// its issuer allows it. Only the fixed ports, /tmp and bin/ are swapped.
func TestOIDCDocsBlock(t *testing.T) {
	d := newDocRun(t, []string{"node"}, "svc-sidecar")
	root := harness.ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "e2e", "node_modules", "oidc-provider", "package.json")); err != nil {
		harness.Missing(t, "npm package oidc-provider", "run scripts/install-test-deps.sh, or npm ci in e2e/")
	}
	idp, grpcAddr, httpAddr := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	_, idpPort, err := net.SplitHostPort(idp)
	if err != nil {
		t.Fatal(err)
	}
	script := d.buildBlock("oidc.md", "### Try it with a local provider",
		[]string{":9400", ":50071", ":7720", "/tmp/svc-oidc"},
		"node e2e/", "node "+filepath.Join(root, "e2e")+"/",
		"/tmp/svc-oidc", filepath.Join(d.dir, "svc-oidc"),
		`"port":9400`, `"port":`+idpPort,
		"127.0.0.1:9400", idp,
		"127.0.0.1:50071", grpcAddr,
		"127.0.0.1:7720", httpAddr,
		"localhost:7720", httpAddr,
	)
	out := d.run("the docs/oidc.md block", "-uo pipefail", harness.ChildEnv(nil), script)
	answersInOrder(t, "the docs/oidc.md block", out,
		`"allowed":true,"reason":"policy-allow".*"subject":"orders-viewer","tenant_id":"acme"`,
		`"jwks_issuers":\[\{"issuer":"http://`+idp+`","jwks_url":"http://`+idp+`/jwks"`,
	)
}
