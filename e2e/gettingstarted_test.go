package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/e2e/harness"
)

// TestGettingStartedProductionSetup runs the "local identity provider"
// block of docs/getting-started.md as written: a sidecar configured as in
// production verifies the tokens of core dev token through the JWKS that
// core dev jwks serves, allows an editor's update and refuses a bearer it
// cannot verify. Only the fixed ports, /tmp and bin/ are swapped.
func TestGettingStartedProductionSetup(t *testing.T) {
	bash := harness.LookPath(t, "bash", "install bash")
	harness.LookPath(t, "curl", "apt-get install curl (scripts/test-packages.txt)")
	bin := filepath.Dir(harness.Binary(t, "svc-sidecar"))
	harness.Binary(t, "core")
	block := docsBlock(t, "getting-started.md", "### Try the production set-up with a local identity provider")
	if !strings.HasPrefix(block, "make build\n") {
		t.Fatalf("the block no longer starts with make build:\n%s", block)
	}
	dir, home := t.TempDir(), t.TempDir()
	idp, grpcAddr, httpAddr := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	script := strings.NewReplacer(
		"make build\n", "",
		"./bin/", bin+"/",
		"/tmp/svc-prod", filepath.Join(dir, "svc-prod"),
		"127.0.0.1:8000", idp,
		"127.0.0.1:50061", grpcAddr,
		"127.0.0.1:7710", httpAddr,
		"localhost:7710", httpAddr,
	).Replace(block)
	for _, fixed := range []string{":8000", ":50061", ":7710", "/tmp/svc-prod"} {
		if strings.Contains(script, fixed) {
			t.Fatalf("%s is still in the block after the swap:\n%s", fixed, script)
		}
	}
	env := append(harness.ChildEnv(nil), "HOME="+home)
	out, err := runDocBlock(t, bash, "-uo pipefail", dir, env, script, 2*time.Minute)
	if err != nil {
		t.Fatalf("the getting-started block failed: %v\n%s", err, out)
	}
	answersInOrder(t, "the getting-started block", string(out),
		`"allowed":true,"reason":"policy-allow".*"subject":"dev-user","tenant_id":"dev"`,
		`"allowed":false,"reason":"token-malformed"`,
	)
	if _, err := os.Stat(filepath.Join(home, ".config", "svc", "dev-issuer", "key.pem")); err != nil {
		t.Errorf("core dev jwks and core dev token did not share ~/.config/svc/dev-issuer: %v", err)
	}
}
