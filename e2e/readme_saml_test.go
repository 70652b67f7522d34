package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/e2e/harness"
)

// docsBlock returns the first ```sh block after the line that starts
// with marker in the page docs/<page>.
func docsBlock(t *testing.T, page, marker string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	return shBlockAfter(t, string(raw), marker)
}

// The local SAML round trip of docs/saml.md works as written: only the default
// ports are swapped for free ones.
func TestREADMESAMLRoundTrip(t *testing.T) {
	bash := harness.LookPath(t, "bash", "bash")
	harness.LookPath(t, "curl", "curl")
	harness.LookPath(t, "jq", "jq")
	grpcAddr, httpAddr, samlAddr := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	script := strings.NewReplacer("127.0.0.1:7701", samlAddr, "127.0.0.1:7700", httpAddr).
		Replace(docsBlock(t, "saml.md", "## Local round trip"))

	bin := filepath.Dir(harness.Binary(t, "svc-sidecar"))
	harness.Binary(t, "core")
	dir := t.TempDir()
	env := []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"SVC_SIDECAR_ADDR=" + grpcAddr, "SVC_HTTP_ADDR=" + httpAddr, "SVC_SAML_ADDR=" + samlAddr,
	}
	out, err := runDocBlock(t, bash, "-euo pipefail", dir, env, script, 3*time.Minute)
	if err != nil {
		t.Fatalf("the docs/saml.md round trip failed: %v\n%s", err, out)
	}
	for _, want := range []string{`"allowed":true`, `"sub":"alice@example.com"`, `"roles":["admin"]`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("validate-token answer lacks %s:\n%s", want, out)
		}
	}
	// The sidecar's log shares the output: the check's status is the one
	// line of three digits.
	var statuses []string
	for _, l := range strings.Split(string(out), "\n") {
		if len(l) == 3 && strings.Trim(l, "0123456789") == "" {
			statuses = append(statuses, l)
		}
	}
	if len(statuses) != 1 || statuses[0] != "200" {
		t.Errorf("check statuses %v, want [200] for the browser's cookie:\n%s", statuses, out)
	}
}

// runDocBlock runs a shell block of the docs with bash (options such as
// "-euo pipefail") in dir with env, in a process group of its own, so that
// whatever it starts in the background is stopped with it, whatever
// happens; it returns the block's combined output.
func runDocBlock(t *testing.T, bash, opts, dir string, env []string, script string, timeout time.Duration) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, append(strings.Fields(opts), "-c", script)...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	return cmd.CombinedOutput()
}
