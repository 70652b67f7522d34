package startcheck

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
)

// TestRun: each step refuses what the sidecar's start refuses, naming
// the setting, and a configuration of defaults passes.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		testkit.WriteFile(t, p, []byte(body))
		return p
	}
	notPEM := write("not.pem", "not PEM")
	tests := []struct {
		name string
		set  func(*config.Config)
		want string
	}{
		{"defaults", func(*config.Config) {}, ""},
		{"no policy directory", func(c *config.Config) { c.Policy.Dir = filepath.Join(dir, "none") }, "policy.dir"},
		{"identity token key not PEM", func(c *config.Config) { c.IdentityToken.SigningKeyFile = notPEM }, "identity_token.signing_key_file"},
		{"TLS files not PEM", func(c *config.Config) { c.Sidecar.TLSCertFile, c.Sidecar.TLSKeyFile = notPEM, notPEM }, "sidecar.tls_cert_file"},
		{"closed without identity source", func(c *config.Config) { c.SDK.FailMode = config.FailClosed }, "sdk.fail_mode"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg config.Config
			tc.set(&cfg)
			err := Run(cfg, func(string) string { return "" })
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Run = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v; want an error naming %s", err, tc.want)
			}
		})
	}
}
