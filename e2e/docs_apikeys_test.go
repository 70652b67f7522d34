package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
)

// The "Try it" block of docs/api-keys.md works as written, with the
// binaries the harness built; only the default ports are swapped for
// free ones.
func TestDocsAPIKeysTryIt(t *testing.T) {
	d := newDocRun(t, nil, "svc-sidecar", "core")
	grpcAddr, httpAddr := harness.FreeAddr(t), harness.FreeAddr(t)
	script := strings.NewReplacer("127.0.0.1:7700", httpAddr).Replace(docsBlock(t, "api-keys.md", "## Try it"))
	out := d.run("the docs/api-keys.md block", "-euo pipefail",
		d.pathEnv("SVC_SIDECAR_ADDR="+grpcAddr, "SVC_HTTP_ADDR="+httpAddr), script)
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
