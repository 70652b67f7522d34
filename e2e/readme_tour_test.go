package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/e2e/harness"
)

// TestReadmeTour runs the README's one-minute tour as written against a
// sidecar started as `make run` starts it (no configuration file, no
// SVC_* variable but the listen addresses): the anonymous bearer is
// refused, the token of `core dev token` reaches an allowed authorize and
// an allowed /check, the same token's DELETE and a tampered token are
// refused. Only the fixed address and bin/ are swapped for the test's.
func TestReadmeTour(t *testing.T) {
	d := newDocRun(t, nil, "core")
	d.timeout = time.Minute
	raw, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := shBlockAfter(t, string(raw), "## A one-minute tour")

	home := t.TempDir()
	s := harness.StartSidecar(t, harness.SidecarOptions{Env: map[string]string{
		// As make run: no tenant, no audit file, no state directory.
		"SVC_TENANT_ID": "", "SVC_AUDIT_DESTINATION": "", "SVC_STATE_DIR": "",
		"SVC_DEV_ISSUER_DIR": "", "HOME": home, "XDG_CONFIG_HOME": "",
	}})
	script := strings.NewReplacer("localhost:7700", s.HTTPAddr, "bin/core", filepath.Join(d.bin, "core")).Replace(block)
	out := d.run("the README tour", "-uo pipefail", append(harness.ChildEnv(nil), "HOME="+home), script)
	// Each answer the README shows, in its order.
	answersInOrder(t, "the README tour", out,
		`"reason":"policy-deny","deny_reasons":\["no-role"\].*"subject":"anonymous"`,
		`"allowed":true,"reason":"policy-allow".*"subject":"dev-user","tenant_id":"dev"`,
		`HTTP/1.1 200 OK(?s:.*)X-Svc-User-Id: dev-user`,
		`HTTP/1.1 403 Forbidden`,
		`"allowed":false,"reason":"signature-invalid"`,
	)
	if _, err := os.Stat(filepath.Join(home, ".config", "svc", "dev-issuer", "key.pem")); err != nil {
		t.Errorf("the development issuer's key is not in ~/.config/svc/dev-issuer: %v", err)
	}
}

// answersInOrder fails the test unless out matches each pattern, each
// after the match of the one before: the answers a documented block shows,
// in its order.
func answersInOrder(t *testing.T, what, out string, patterns ...string) {
	t.Helper()
	rest := out
	for _, p := range patterns {
		loc := regexp.MustCompile(p).FindStringIndex(rest)
		if loc == nil {
			t.Fatalf("the answers of %s lack %s, in order:\n%s", what, p, out)
		}
		rest = rest[loc[1]:]
	}
}

// shBlockAfter returns the first sh code block after the line marker.
func shBlockAfter(t *testing.T, page, marker string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, "\n"+marker)
	if !ok {
		t.Fatalf("no line starting with %q", marker)
	}
	_, rest, ok = strings.Cut(rest, "\n```sh\n")
	if !ok {
		t.Fatalf("no sh block after %q", marker)
	}
	block, _, ok := strings.Cut(rest, "\n```\n")
	if !ok {
		t.Fatal("unterminated sh block")
	}
	return block
}
