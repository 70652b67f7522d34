package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/samltest"
)

// runIn runs the binary of name in dir with HOME set to home (the default
// --idp-dir lives under it) and returns its exit code and output.
func runIn(t *testing.T, name, dir, home string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(harness.Binary(t, name), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	return testkit.Run(t, cmd)
}

// TestSAMLCommandsSameInBothPrograms runs `saml metadata` and `saml
// test-assertion` under core and under svc-sidecar with the same flags:
// the exit codes and output are the same, but for the program's name in
// messages and, for a signed assertion, its fresh id and instants.
func TestSAMLCommandsSameInBothPrograms(t *testing.T) {
	tmp := t.TempDir()
	idpDir := filepath.Join(tmp, "idp")
	// Create the test IdP once, so that neither run says "created".
	if code, _, stderr := runIn(t, "core", tmp, tmp, "saml", "test-assertion", "--idp-dir", idpDir, "--metadata", "--out", filepath.Join(tmp, "idp.xml")); code != 0 {
		t.Fatalf("create the test IdP: exit %d: %s", code, stderr)
	}
	cfg := harness.WriteFile(t, tmp, "saml.toml", samltest.LocalSPConfig(filepath.Join(tmp, "idp.xml")))
	noSAML := harness.WriteFile(t, tmp, "plain.toml", "[sdk]\ntenant_id = \"acme\"\n")
	mdOut := filepath.Join(tmp, "md.xml")

	tests := []struct {
		name string
		args []string
		code int
		// signed: the output holds a fresh assertion; compare its report.
		signed bool
	}{
		{"sp metadata", []string{"--config", cfg, "saml", "metadata"}, 0, false},
		{"sp metadata after saml", []string{"saml", "metadata", "--config", cfg}, 0, false},
		{"sp metadata json", []string{"--config", cfg, "saml", "metadata", "--output", "json"}, 0, false},
		{"sp metadata to --out", []string{"--config", cfg, "saml", "metadata", "--out", mdOut}, 0, false},
		{"sp metadata to --output file", []string{"--config", cfg, "saml", "metadata", "--output", mdOut}, 0, false},
		{"sp metadata svc.toml of the working dir", []string{"saml", "metadata", "--output", "json"}, 0, false},
		{"idp metadata", []string{"saml", "test-assertion", "--idp-dir", idpDir, "--metadata"}, 0, false},
		{"assertion json", []string{"--config", cfg, "saml", "test-assertion", "--idp-dir", idpDir,
			"--email", "dana@example.com", "--role", "admin", "--role", "billing", "--tenant", "acme", "--output", "json"}, 0, true},
		{"assertion without config", []string{"saml", "test-assertion", "--idp-dir", idpDir, "--email", "dana@example.com",
			"--tenant", "acme", "--entity-id", "urn:sp", "--acs-url", "https://sp.example/acs", "--output", "json"}, 0, true},
		{"no sdk.saml", []string{"--config", noSAML, "saml", "metadata"}, 2, false},
		{"no sdk.saml json", []string{"--config", noSAML, "saml", "metadata", "--output", "json"}, 2, false},
		{"unreadable config", []string{"--config", filepath.Join(tmp, "missing.toml"), "saml", "metadata"}, 2, false},
		{"missing email", []string{"--config", cfg, "saml", "test-assertion", "--idp-dir", idpDir, "--tenant", "acme"}, 2, false},
		{"bad ttl", []string{"--config", cfg, "saml", "test-assertion", "--idp-dir", idpDir, "--email", "a@b", "--tenant", "t", "--ttl", "-1s"}, 2, false},
		{"unknown flag", []string{"saml", "metadata", "--no-such-flag"}, 2, false},
		{"unknown command", []string{"saml", "nope"}, 2, false},
		{"argument", []string{"--config", cfg, "saml", "metadata", "extra"}, 2, false},
		{"out and output", []string{"--config", cfg, "saml", "metadata", "--out", mdOut, "--output", mdOut + ".2"}, 2, false},
	}
	workDir := filepath.Join(tmp, "wd")
	if err := os.Mkdir(workDir, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	harness.WriteFile(t, workDir, "svc.toml", string(raw))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var outs [2]string
			var errs [2]string
			for i, prog := range []string{"core", "svc-sidecar"} {
				os.Remove(mdOut)
				code, stdout, stderr := runIn(t, prog, workDir, tmp, tc.args...)
				if code != tc.code {
					t.Fatalf("%s %s: exit %d, want %d\nstdout: %s\nstderr: %s", prog, strings.Join(tc.args, " "), code, tc.code, stdout, stderr)
				}
				if file, err := os.ReadFile(mdOut); err == nil {
					stdout += "\n--- file ---\n" + string(file)
				}
				// SP metadata is valid for a while from now.
				outs[i] = validUntil.ReplaceAllString(stdout, `validUntil=\"…\"`)
				errs[i] = strings.ReplaceAll(stderr, prog, "PROGRAM")
			}
			if tc.signed {
				outs[0], outs[1] = signedReport(t, outs[0]), signedReport(t, outs[1])
			}
			if outs[0] == "" && tc.code == 0 {
				t.Fatal("no output")
			}
			if d := cmp.Diff(outs[0], outs[1]); d != "" {
				t.Errorf("stdout differs (-core +svc-sidecar):\n%s", d)
			}
			if d := cmp.Diff(errs[0], errs[1]); d != "" {
				t.Errorf("stderr differs (-core +svc-sidecar):\n%s", d)
			}
			if tc.code != 0 && !strings.Contains(errs[0], "PROGRAM: ") {
				t.Errorf("stderr %q does not name the program", errs[0])
			}
		})
	}
}

var validUntil = regexp.MustCompile(`validUntil=\\?"[^"\\]*\\?"`)

// signedReport decodes the --output json report of test-assertion, checks
// that its response is a signed SAMLResponse, and returns the report
// without what changes on every run (the response, its expiry).
func signedReport(t *testing.T, out string) string {
	t.Helper()
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	b64, _ := r["saml_response"].(string)
	doc, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || !bytes.Contains(doc, []byte("<ds:Signature")) || !bytes.Contains(doc, []byte("dana@example.com")) {
		t.Fatalf("saml_response is not a signed response for dana@example.com (%v): %.200s", err, doc)
	}
	delete(r, "saml_response")
	delete(r, "expires_at")
	b, _ := json.Marshal(r)
	return string(b)
}
