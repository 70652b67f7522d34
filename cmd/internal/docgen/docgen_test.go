package docgen

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the generated parts of docs/")

// TestGeneratedPagesCurrent regenerates the configuration table and the
// reason-code table and requires the pages to hold them (-update, or
// make docs, rewrites them).
func TestGeneratedPagesCurrent(t *testing.T) {
	root := ModuleRoot()
	keys, err := ConfigKeys(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := UpdateFile(filepath.Join(root, "docs", "configuration.md"), "config-keys", ConfigTable(keys), *update); err != nil {
		t.Error(err)
	}
	codes, err := ReasonCodes(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := UpdateFile(filepath.Join(root, "docs", "api.md"), "reason-codes", ReasonTable(codes), *update); err != nil {
		t.Error(err)
	}
}

// TestConfigKeysKnown: the walk finds the keys a reader looks up, with the
// variable, the default and a meaning.
func TestConfigKeysKnown(t *testing.T) {
	keys, err := ConfigKeys(ModuleRoot())
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]ConfigKey{}
	for _, k := range keys {
		byKey[k.Key] = k
	}
	for _, c := range []ConfigKey{
		{Key: "sdk.fail_mode", Env: "SVC_FAIL_MODE", Default: `"open"`},
		{Key: "sidecar.http_addr", Env: "SVC_HTTP_ADDR", Default: `"127.0.0.1:7700"`},
		{Key: "jwt.cache_size", Default: "20000"},
		{Key: "sdk.saml.token_ttl", Env: "SVC_SAML_TOKEN_TTL", Default: `"15m0s"`},
		{Key: "tenants.<id>.plan"},
		{Key: "sdk.saml.acs_max_concurrent", Env: "SVC_SAML_ACS_MAX_CONCURRENT", Default: "(from the machine)"},
		{Key: "rate_limit.per_tenant.<id>"},
		{Key: "sidecar.routes[].path"},
		{Key: "sdk.saml.sp_private_key_pem", Env: "SVC_SAML_SP_PRIVATE_KEY_PEM"},
	} {
		got, ok := byKey[c.Key]
		if !ok {
			t.Errorf("no key %s", c.Key)
			continue
		}
		if got.Env != c.Env || (c.Default != "" && got.Default != c.Default) || got.Meaning == "" {
			t.Errorf("%s = %+v, want env %q default %q and a meaning", c.Key, got, c.Env, c.Default)
		}
		if strings.Contains(got.Meaning, "Env SVC_") || strings.HasPrefix(got.Meaning, "SidecarAddr") {
			t.Errorf("%s: meaning keeps the env sentence: %s", c.Key, got.Meaning)
		}
	}
}

// TestReasonCodesKnown: codes of each file of package reason are found,
// once each, with where they are met.
func TestReasonCodesKnown(t *testing.T) {
	codes, err := ReasonCodes(ModuleRoot())
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]ReasonCode{}
	for _, c := range codes {
		have[c.Code] = c
	}
	for want, where := range map[string]string{
		"token-expired":          "decisions (all APIs)",
		"policy-deny":            "decisions (all APIs)",
		"oidc-state-unknown":     "OIDC sign-in",
		"signed-bundle-required": "HTTP API, status",
		"admin-token-required":   "HTTP API, status",
		"filter-invalid":         "HTTP API, status",
		"saml-replayed":          "SAML gateway",
		"engine-panic":           "Rust C ABI",
	} {
		if c := have[want]; c.Meaning == "" || c.Where != where {
			t.Errorf("reason code %s = %+v, want a meaning and where %q", want, c, where)
		}
	}
}

// TestReasonCodesUnlistedFile: a file of package reason that declares
// codes but is not in reasonFiles fails the walk rather than leaving its
// codes out of the reference.
func TestReasonCodesUnlistedFile(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "reason")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range reasonFiles {
		testkit.WriteFileMode(t, filepath.Join(dir, f.file), []byte("package reason\n"), 0o644)
	}
	extra := "package reason\n\n// Extra: a code of a new file.\nconst Extra Code = \"extra\"\n"
	testkit.WriteFileMode(t, filepath.Join(dir, "extra.go"), []byte(extra), 0o644)
	if _, err := ReasonCodes(root); err == nil || !strings.Contains(err.Error(), "extra.go") {
		t.Fatalf("ReasonCodes = %v, want an error naming extra.go", err)
	}
}

// pendingPages are linked from the README but written on another branch
// (none now).
var pendingPages = map[string]bool{}

// TestDocLinks: every relative link and anchor of README.md and docs/
// resolves.
func TestDocLinks(t *testing.T) {
	root := ModuleRoot()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("docs/ has %d pages", len(pages))
	}
	for _, p := range append(pages, filepath.Join(root, "README.md")) {
		for _, err := range CheckLinks(root, p, pendingPages) {
			t.Error(err)
		}
	}
}

// TestReadmeFrontDoor: the README stays a front door.
func TestReadmeFrontDoor(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(ModuleRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 300 {
		t.Errorf("README.md has %d lines; the reference belongs in docs/", n)
	}
	for _, want := range []string{"make run", "make test", "```mermaid"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
}
