package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/e2e/harness"
)

// TestConfigValidateAgreesWithTheSidecar: for each configuration file,
// `core config validate` says valid exactly when svc-sidecar started on
// the same file serves. The file lives in a directory of its own and the
// sidecar runs elsewhere, so relative paths resolve against the file in
// both.
func TestConfigValidateAgreesWithTheSidecar(t *testing.T) {
	core := harness.Binary(t, "core")
	policy, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "policies", "authz.rego"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, config string
		files        map[string]string
		valid        bool
	}{
		{"policy directory beside the file", "[policy]\ndir = \"pol\"\n", map[string]string{"pol/authz.rego": string(policy)}, true},
		{"embedded default policy", "[log]\nlevel = \"info\"\n", nil, true},
		{"no policy directory", "[policy]\ndir = \"pol\"\n", nil, false},
		{"policy that does not compile", "[policy]\ndir = \"pol\"\n", map[string]string{"pol/x.rego": "package svc.authz\nallow if {\n"}, false},
		{"policy of another package only", "[policy]\ndir = \"pol\"\n", map[string]string{"pol/x.rego": "package other\nallow := true\n"}, false},
		{"missing TLS files", "[sidecar]\ntls_cert_file = \"tls.crt\"\ntls_key_file = \"tls.key\"\n", nil, false},
		{"TLS files that are not PEM", "[sidecar]\ntls_cert_file = \"tls.crt\"\ntls_key_file = \"tls.key\"\n",
			map[string]string{"tls.crt": "not a certificate", "tls.key": "not a key"}, false},
		{"closed without an identity source", "[sdk]\nfail_mode = \"closed\"\n", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				harness.WriteFile(t, dir, name, body)
			}
			path := harness.WriteFile(t, dir, "svc.toml", tc.config)

			out, err := exec.Command(core, "config", "validate", path).CombinedOutput()
			valid := err == nil
			if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() != 1 {
				t.Fatalf("core config validate exited %d:\n%s", ee.ExitCode(), out)
			}

			s := harness.LaunchSidecar(t, harness.SidecarOptions{Args: []string{"--config", path}})
			_, werr := s.WaitOutput(t, true, 30*time.Second, func(out string) bool {
				return strings.Contains(out, `"msg":"svc-sidecar serving"`)
			})
			served := werr == nil
			if served {
				s.Stop(t)
			}
			if valid != served || valid != tc.valid {
				t.Errorf("core config validate valid=%v, svc-sidecar served=%v, want both %v\nvalidate:\n%s\nsidecar:\n%s",
					valid, served, tc.valid, out, s.Stderr.String())
			}
		})
	}
}
