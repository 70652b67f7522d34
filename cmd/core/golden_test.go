package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// goldenCase is one command line, its exit code and a golden file of its
// normalized output.
type goldenCase struct {
	name string
	args []string
	code int
}

const (
	pol      = "testdata/policy"
	allowed  = `{"action":"orders:update","user":{"id":"u-1","role":"editor","roles":["editor"],"tenant_id":"acme","claims":{}},"resource":{"id":"ord-1","tenant":"acme"},"tenant":{"id":"acme","plan":"team"}}`
	crossTen = "testdata/inputs/viewer-cross-tenant.input.json"
)

var goldenCases = []goldenCase{
	// Global flags.
	{"version", []string{"--version"}, 0},
	{"unknown-command", []string{"policy", "frobnicate", pol}, 2},
	{"unknown-flag", []string{"policy", "test", pol, "--nope"}, 2},
	{"bad-log-level", []string{"--log-level", "verbose", "policy", "lint", pol}, 2},
	{"bad-output", []string{"--output", "yaml", "policy", "lint", pol}, 2},
	{"output-file-on-lint", []string{"policy", "lint", pol, "--output", "report.json"}, 2},
	{"config-unreadable", []string{"--config", "/nonexistent.toml", "policy", "lint", pol}, 2},
	{"config-unreadable-json", []string{"--config", "testdata/nope.toml", "--output", "json", "coverage", pol}, 2},
	{"config-directory", []string{"--config", "testdata", "policy", "test", pol}, 2},
	{"config-readable", []string{"--config", "testdata/svc.toml", "policy", "lint", pol}, 0},
	{"bad-sidecar", []string{"--sidecar", "localhost:7700", "policy", "lint", pol}, 2},

	// policy test
	{"test-fixtures", []string{"policy", "test", pol}, 0},
	{"test-fixtures-failing", []string{"policy", "test", pol, "--fixtures", "testdata/fixtures-failing"}, 1},
	{"test-fixtures-failing-ci", []string{"policy", "test", pol, "--fixtures", "testdata/fixtures-failing", "--ci"}, 1},
	{"test-fixtures-verbose", []string{"policy", "test", pol, "--fixtures", "testdata/fixtures-failing", "--verbose"}, 1},
	{"test-input-allowed", []string{"policy", "test", pol, "--input", allowed}, 0},
	{"test-input-file-denied", []string{"policy", "test", pol, "--input-file", crossTen}, 0},
	{"test-input-verbose", []string{"policy", "test", pol, "--input-file", crossTen, "--verbose"}, 0},
	{"test-expect-pass", []string{"policy", "test", pol, "--input-file", crossTen, "--expect", "deny", "--expect-reason", "tenant"}, 0},
	{"test-expect-wrong", []string{"policy", "test", pol, "--input-file", crossTen, "--expect", "allow"}, 1},
	{"test-expect-reason-missing", []string{"policy", "test", pol, "--input-file", crossTen, "--expect-reason", "plan-required"}, 1},
	{"test-input-json", []string{"--output", "json", "policy", "test", pol, "--input-file", crossTen, "--expect", "deny"}, 0},
	{"test-input-malformed", []string{"policy", "test", pol, "--input", `{"action": "orders:read",}`}, 2},
	{"test-input-file-malformed", []string{"policy", "test", pol, "--input-file", "testdata/inputs/malformed.input.json"}, 2},
	{"test-input-file-malformed-json", []string{"policy", "test", pol, "--input-file", "testdata/inputs/malformed.input.json", "--ci"}, 2},
	{"test-fixture-orphan", []string{"policy", "test", pol, "--fixtures", "testdata/fixtures-orphan"}, 2},
	{"test-missing-dir", []string{"policy", "test", "testdata/nope", "--input", allowed}, 2},
	{"test-missing-dir-no-input", []string{"policy", "test", "testdata/nope"}, 2},
	{"test-input-at-file", []string{"policy", "test", pol, "--input", "@" + crossTen, "--expect", "deny"}, 0},
	{"test-input-path-without-at", []string{"policy", "test", pol, "--input", crossTen}, 2},
	{"test-policy-broken", []string{"policy", "test", "testdata/policy-broken", "--input", allowed}, 2},
	{"test-two-sources", []string{"policy", "test", pol, "--input", allowed, "--fixtures", "testdata/policy/fixtures"}, 2},
	{"test-bad-expect", []string{"policy", "test", pol, "--input", allowed, "--expect", "maybe"}, 2},
	{"test-no-argument", []string{"policy", "test"}, 2},

	// policy lint
	{"lint-ok", []string{"policy", "lint", pol}, 0},
	{"lint-broken", []string{"policy", "lint", "testdata/lint-broken"}, 1},
	{"lint-broken-json", []string{"policy", "lint", "testdata/lint-broken", "--format", "json"}, 1},
	{"lint-warning", []string{"policy", "lint", "testdata/lint-warning"}, 0},
	{"lint-warning-strict", []string{"policy", "lint", "testdata/lint-warning", "--strict"}, 1},
	{"lint-policy-broken", []string{"policy", "lint", "testdata/policy-broken"}, 1},
	{"lint-missing-dir", []string{"policy", "lint", "testdata/nope"}, 2},
	{"lint-bad-format", []string{"policy", "lint", pol, "--format", "xml"}, 2},
	{"lint-format-text", []string{"policy", "lint", pol, "--format", "text"}, 0},
	{"lint-format-contradicts-output", []string{"--output", "json", "policy", "lint", pol, "--format", "text"}, 2},

	// policy bench
	{"bench-default", []string{"policy", "bench", pol, "--iterations", "50", "--warmup", "5"}, 0},
	{"bench-input-json", []string{"--output", "json", "policy", "bench", pol, "--input", "@" + crossTen, "--iterations", "50"}, 0},
	{"bench-input-inline", []string{"policy", "bench", pol, "--input", allowed, "--iterations", "50"}, 0},
	{"bench-input-file", []string{"policy", "bench", pol, "--input-file", crossTen, "--iterations", "50"}, 0},
	{"bench-input-path-without-at", []string{"policy", "bench", pol, "--input", crossTen, "--iterations", "50"}, 0},
	{"bench-input-path-missing", []string{"policy", "bench", pol, "--input", "testdata/inputs/nope.json"}, 2},
	{"bench-input-path-dir", []string{"policy", "bench", pol, "--input", "testdata/inputs"}, 2},
	{"bench-input-path-malformed", []string{"policy", "bench", pol, "--input", "testdata/inputs/malformed.input.json"}, 2},
	{"bench-input-not-json-nor-file", []string{"policy", "bench", pol, "--input", "orders:read"}, 2},
	{"bench-gate-impossible", []string{"policy", "bench", pol, "--iterations", "50", "--p99-max-us", "0", "--ci"}, 1},
	{"bench-gate-generous", []string{"policy", "bench", pol, "--iterations", "50", "--p99-max-us", "1000000", "--ci"}, 0},
	{"bench-gate-warn-only", []string{"policy", "bench", pol, "--iterations", "50", "--p99-max-us", "0"}, 0},
	{"bench-bad-iterations", []string{"policy", "bench", pol, "--iterations", "0"}, 2},
	{"bench-input-malformed", []string{"policy", "bench", pol, "--input", "@testdata/inputs/malformed.input.json"}, 2},
	{"bench-input-missing-file", []string{"policy", "bench", pol, "--input", "@testdata/inputs/nope.json"}, 2},

	// policy bundle
	{"bundle-signed", []string{"policy", "bundle", "--dir", pol, "--sign-key", "$TMP/ec.pem", "--revision", "g1", "--out", "$TMP/g1.tar.gz"}, 0},
	{"bundle-json", []string{"policy", "bundle", "--dir", pol, "--sign-key", "$TMP/rsa.pem", "--key-id", "prod", "--out", "$TMP/g2.tar.gz", "--output", "json"}, 0},
	{"bundle-format-json", []string{"policy", "bundle", "--dir", pol, "--out", "$TMP/g2b.tar.gz", "--format", "json"}, 0},
	{"bundle-unsigned", []string{"policy", "bundle", "--dir", pol, "--output", "$TMP/g3.tar.gz"}, 0},
	{"bundle-output-json-no-file", []string{"policy", "bundle", "--dir", pol, "--output", "json"}, 2},
	{"bundle-out-and-output-file", []string{"policy", "bundle", "--dir", pol, "--out", "$TMP/g8.tar.gz", "--output", "$TMP/g9.tar.gz"}, 2},
	{"bundle-missing-dir", []string{"policy", "bundle", "--dir", "testdata/nope", "--output", "$TMP/g4.tar.gz"}, 2},
	{"bundle-missing-output", []string{"policy", "bundle", "--dir", pol}, 2},
	{"bundle-public-key-to-sign", []string{"policy", "bundle", "--dir", pol, "--sign-key", "$TMP/ec.pub", "--output", "$TMP/g5.tar.gz"}, 2},
	{"bundle-bad-alg", []string{"policy", "bundle", "--dir", pol, "--sign-key", "$TMP/ec.pem", "--alg", "HS256", "--output", "$TMP/g6.tar.gz"}, 2},
	{"bundle-policy-broken", []string{"policy", "bundle", "--dir", "testdata/policy-broken", "--output", "$TMP/g7.tar.gz"}, 2},

	// policy bundle inspect
	{"inspect-signed", []string{"policy", "bundle", "inspect", "$TMP/signed.tar.gz"}, 0},
	{"inspect-unsigned", []string{"policy", "bundle", "inspect", "$TMP/unsigned.tar.gz"}, 0},
	{"inspect-verify-ok", []string{"policy", "bundle", "inspect", "$TMP/signed.tar.gz", "--verify-key", "$TMP/ec.pub"}, 0},
	{"inspect-verify-ps256", []string{"policy", "bundle", "inspect", "$TMP/signed-ps.tar.gz", "--verify-key", "$TMP/rsa.pub"}, 0},
	{"inspect-verify-json", []string{"--output", "json", "policy", "bundle", "inspect", "$TMP/signed.tar.gz", "--verify-key", "$TMP/ec.pub"}, 0},
	{"inspect-verify-wrong-key", []string{"policy", "bundle", "inspect", "$TMP/signed.tar.gz", "--verify-key", "$TMP/other.pub"}, 1},
	{"inspect-verify-tampered", []string{"policy", "bundle", "inspect", "$TMP/tampered.tar.gz", "--verify-key", "$TMP/ec.pub"}, 1},
	{"inspect-verify-unsigned", []string{"policy", "bundle", "inspect", "$TMP/unsigned.tar.gz", "--verify-key", "$TMP/ec.pub"}, 1},
	{"inspect-verify-unsigned-json", []string{"--output", "json", "policy", "bundle", "inspect", "$TMP/unsigned.tar.gz", "--verify-key", "$TMP/ec.pub"}, 1},
	{"inspect-garbage", []string{"policy", "bundle", "inspect", "$TMP/garbage.tar.gz"}, 2},
	{"inspect-missing", []string{"policy", "bundle", "inspect", "$TMP/nope.tar.gz"}, 2},

	// config validate
	{"config-validate-ok", []string{"config", "validate", "testdata/config/svc.toml"}, 0},
	{"config-validate-yaml", []string{"config", "validate", "testdata/config/svc.yaml"}, 0},
	{"config-validate-json", []string{"--output", "json", "config", "validate", "testdata/config/changed.toml"}, 0},
	{"config-validate-unknown-key", []string{"config", "validate", "testdata/config/unknown_key.toml"}, 1},
	{"config-validate-bad-value", []string{"config", "validate", "testdata/config/bad_value.yaml"}, 1},
	{"config-validate-bad-value-json", []string{"--output", "json", "config", "validate", "testdata/config/bad_value.yaml"}, 1},
	{"config-validate-syntax", []string{"config", "validate", "testdata/config/syntax.toml"}, 1},
	{"config-validate-missing", []string{"config", "validate", "testdata/config/nope.toml"}, 2},
	{"config-validate-extension", []string{"config", "validate", "testdata/config/svc.ini"}, 2},
	{"config-validate-nginx", []string{"config", "validate", "testdata/config/svc.toml", "--nginx-config", "../../deploy/nginx/nginx.conf"}, 0},
	{"config-validate-nginx-underscores", []string{"config", "validate", "testdata/config/svc.toml", "--nginx-config", "testdata/config/nginx-underscores.conf"}, 1},
	{"config-validate-nginx-underscores-json", []string{"--output", "json", "config", "validate", "testdata/config/svc.toml", "--nginx-config", "testdata/config/nginx-underscores.conf"}, 1},
	{"config-validate-nginx-client-cert", []string{"config", "validate", "testdata/config/clientcerts.toml", "--nginx-config", "testdata/config/nginx-client-cert.conf"}, 1},
	{"config-validate-nginx-client-cert-no-ca", []string{"config", "validate", "testdata/config/clientcerts.toml", "--nginx-config", "testdata/config/nginx-client-cert-no-ca.conf"}, 1},
	{"config-validate-nginx-client-cert-shipped", []string{"config", "validate", "testdata/config/clientcerts.toml", "--nginx-config", "../../deploy/nginx/nginx.conf"}, 0},
	{"config-validate-nginx-client-cert-unread", []string{"config", "validate", "testdata/config/svc.toml", "--nginx-config", "testdata/config/nginx-client-cert.conf"}, 0},
	{"config-validate-nginx-missing", []string{"config", "validate", "testdata/config/svc.toml", "--nginx-config", "testdata/config/nope.conf"}, 2},

	// config diff
	{"config-diff-twins", []string{"config", "diff", "testdata/config/svc.toml", "testdata/config/svc.yaml"}, 0},
	{"config-diff-changed", []string{"config", "diff", "testdata/config/svc.toml", "testdata/config/changed.toml"}, 1},
	{"config-diff-changed-json", []string{"--output", "json", "config", "diff", "testdata/config/svc.toml", "testdata/config/changed.toml"}, 1},
	{"config-diff-invalid", []string{"config", "diff", "testdata/config/svc.toml", "testdata/config/unknown_key.toml"}, 2},
	{"config-diff-missing", []string{"config", "diff", "testdata/config/svc.toml", "testdata/config/nope.toml"}, 2},
	{"config-diff-no-other", []string{"config", "diff", "testdata/config/svc.toml"}, 2},

	// coverage
	{"coverage", []string{"coverage", pol}, 0},
	{"coverage-json", []string{"--output", "json", "coverage", pol, "--fixtures", "testdata/fixtures-failing"}, 0},
	{"coverage-min-met", []string{"coverage", pol, "--min", "50"}, 0},
	{"coverage-min-missed", []string{"coverage", pol, "--fixtures", "testdata/fixtures-failing", "--min", "95"}, 1},
	{"coverage-no-fixtures", []string{"coverage", "testdata/lint-warning"}, 2},
	{"coverage-orphan", []string{"coverage", pol, "--fixtures", "testdata/fixtures-orphan"}, 2},
}

// TestGolden runs every case, checks its exit code, checks that JSON
// output is exactly one document, and compares the normalized output
// with its golden file.
func TestGolden(t *testing.T) {
	tmp := workspace(t)
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tmp, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			if jsonArgs(tc.args) {
				checkOneJSON(t, r.stdout)
			}
			got := fmt.Sprintf("$ core %s\nexit: %d\n-- stdout --\n%s-- stderr --\n%s",
				strings.Join(tc.args, " "), r.code, normalize(r.stdout, tmp), normalize(r.stderr, tmp))
			golden(t, tc.name, got)
		})
	}
}

// jsonArgs reports whether the command line asks for JSON output.
func jsonArgs(args []string) bool {
	for i, a := range args {
		if a == "--ci" || ((a == "--format" || a == "--output") && i+1 < len(args) && args[i+1] == "json") {
			return true
		}
	}
	return false
}

// TestJSONOnEveryCommand runs each command with --output json, on success
// and on failure, and checks that stdout is always exactly one JSON
// document.
func TestJSONOnEveryCommand(t *testing.T) {
	tmp := workspace(t)
	for _, tc := range goldenCases {
		if slices.Contains(tc.args, "--version") || slices.Contains(tc.args, "bundle") && !slices.Contains(tc.args, "inspect") {
			continue // --version prints text; bundle's --output names the file
		}
		if slices.Contains(tc.args, "--output") || slices.Contains(tc.args, "--format") {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tmp, append([]string{"--output", "json"}, tc.args...)...)
			if strings.HasPrefix(tc.name, "unknown-") || tc.name == "bad-output" {
				return // flag parsing fails before --output is known
			}
			checkOneJSON(t, r.stdout)
		})
	}
}
