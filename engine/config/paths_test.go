package config

import (
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

// TestRelativePathsResolveAgainstTheFile: relative paths in a config file
// name files beside it, whatever the working directory; paths from SVC_*
// variables stay as given (the working directory's), and absolute paths
// and audit streams are untouched.
func TestRelativePathsResolveAgainstTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "svc.toml")
	data := `[policy]
dir = "policies"
bundle_cache_dir = "../cache"
[api_keys]
file = "api-keys.toml"
[sidecar]
admin_token_file = "/etc/svc/admin-token"
[audit]
destination = "log/audit.jsonl"
`
	testkit.WriteFile(t, path, []byte(data))
	noEnv := func(string) (string, bool) { return "", false }
	for name, load := range map[string]func() (Config, error){
		"Load":     func() (Config, error) { return Load(path, noEnv) },
		"ReadFile": func() (Config, error) { return ReadFile(path) },
	} {
		t.Run(name, func(t *testing.T) {
			c, err := load()
			if err != nil {
				t.Fatal(err)
			}
			for key, got := range map[string][2]string{
				"policy.dir":               {c.Policy.Dir, filepath.Join(dir, "policies")},
				"policy.bundle_cache_dir":  {c.Policy.BundleCacheDir, filepath.Join(filepath.Dir(dir), "cache")},
				"sidecar.admin_token_file": {c.Sidecar.AdminTokenFile, "/etc/svc/admin-token"},
				"api_keys.file":            {c.APIKeys.File, filepath.Join(dir, "api-keys.toml")},
				"audit.destination":        {c.Audit.Destination, filepath.Join(dir, "log", "audit.jsonl")},
			} {
				if got[0] != got[1] {
					t.Errorf("%s = %q; want %q", key, got[0], got[1])
				}
			}
		})
	}

	env := map[string]string{"SVC_POLICY_DIR": "from-env", "SVC_AUDIT_DESTINATION": "stderr"}
	c, err := Load(path, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy.Dir != "from-env" || c.Audit.Destination != "stderr" {
		t.Errorf("from the environment: policy.dir = %q, audit.destination = %q; want them as given", c.Policy.Dir, c.Audit.Destination)
	}
}
