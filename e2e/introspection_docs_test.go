package e2e

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/svc-dev/svc/e2e/harness"
)

// TestIntrospectionDocsBlock runs the "local provider" block of
// docs/introspection.md as written: oidc-provider issues an opaque token,
// and a sidecar that introspects it allows it. Only the fixed ports,
// /tmp and bin/ are swapped.
func TestIntrospectionDocsBlock(t *testing.T) {
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
	script := d.buildBlock("introspection.md", "## Try it with a local provider",
		[]string{":9410", ":50072", ":7721", "/tmp/svc-introspect"},
		"node e2e/", "node "+filepath.Join(root, "e2e")+"/",
		"/tmp/svc-introspect", filepath.Join(d.dir, "svc-introspect"),
		`"port":9410`, `"port":`+idpPort,
		"127.0.0.1:9410", idp,
		"127.0.0.1:50072", grpcAddr,
		"127.0.0.1:7721", httpAddr,
		"localhost:7721", httpAddr,
	)
	out := d.run("the docs/introspection.md block", "-uo pipefail", harness.ChildEnv(nil), script)
	answersInOrder(t, "the docs/introspection.md block", out,
		`opaque token: 4\d characters`,
		`"allowed":true,"reason":"policy-allow".*"subject":"orders-job","tenant_id":"acme"`,
		`"allowed":false.*"reason":"token-inactive"`,
		`"introspection":\{"url":"`+regexp.QuoteMeta("http://"+idp+"/token/introspection")+`","shared":false,"cache_entries":2,"calls":2,"failures":0\}`,
	)
}
