package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/e2e/harness"
)

// The "Try it" block of docs/api-keys.md works as written, with the
// binaries the harness built; only the default ports are swapped for
// free ones.
func TestDocsAPIKeysTryIt(t *testing.T) {
	bash := harness.LookPath(t, "bash", "install bash")
	harness.LookPath(t, "curl", "apt-get install curl (scripts/test-packages.txt)")
	bin := filepath.Dir(harness.Binary(t, "svc-sidecar"))
	harness.Binary(t, "core")
	dir := t.TempDir()
	grpcAddr, httpAddr := harness.FreeAddr(t), harness.FreeAddr(t)
	script := strings.NewReplacer("127.0.0.1:7700", httpAddr).Replace(docsBlock(t, "api-keys.md", "## Try it"))
	env := []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + dir, "SVC_SIDECAR_ADDR=" + grpcAddr, "SVC_HTTP_ADDR=" + httpAddr,
	}
	out, err := runDocBlock(t, bash, "-euo pipefail", dir, env, script, 2*time.Minute)
	if err != nil {
		t.Fatalf("the docs/api-keys.md block failed: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 5 || lines[0] != "200" || lines[1] != "403" || lines[len(lines)-1] != "revoked" {
		t.Fatalf("want 200, 403, the list and revoked:\n%s", out)
	}
	if !strings.Contains(string(out), "reporting") || strings.Contains(string(out), "sha256") {
		t.Errorf("the list does not show the key's subject, or shows its hash:\n%s", out)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "api-keys.toml")); err != nil || !strings.Contains(string(data), "revoked = true") {
		t.Errorf("the key file is not revoked: %v\n%s", err, data)
	}
}
