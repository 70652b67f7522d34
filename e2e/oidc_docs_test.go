package e2e

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
)

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
