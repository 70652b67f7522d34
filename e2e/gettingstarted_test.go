package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/e2e/harness"
)

// TestGettingStartedProductionSetup runs the "local identity provider"
// block of docs/getting-started.md as written: a sidecar configured as in
// production verifies the tokens of core dev token through the JWKS that
// core dev jwks serves, allows an editor's update and refuses a bearer it
// cannot verify. Only the fixed ports, /tmp and bin/ are swapped.
func TestGettingStartedProductionSetup(t *testing.T) {
	d := newDocRun(t, nil, "svc-sidecar", "core")
	home := t.TempDir()
	idp, grpcAddr, httpAddr := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	script := d.buildBlock("getting-started.md", "### Try the production set-up with a local identity provider",
		[]string{":8000", ":50061", ":7710", "/tmp/svc-prod"},
		"/tmp/svc-prod", filepath.Join(d.dir, "svc-prod"),
		"127.0.0.1:8000", idp,
		"127.0.0.1:50061", grpcAddr,
		"127.0.0.1:7710", httpAddr,
		"localhost:7710", httpAddr,
	)
	out := d.run("the getting-started block", "-uo pipefail", append(harness.ChildEnv(nil), "HOME="+home), script)
	answersInOrder(t, "the getting-started block", out,
		`"allowed":true,"reason":"policy-allow".*"subject":"dev-user","tenant_id":"dev"`,
		`"allowed":false,"reason":"token-malformed"`,
	)
	if _, err := os.Stat(filepath.Join(home, ".config", "svc", "dev-issuer", "key.pem")); err != nil {
		t.Errorf("core dev jwks and core dev token did not share ~/.config/svc/dev-issuer: %v", err)
	}
}
