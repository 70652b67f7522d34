package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/bundle"
)

// TestDefaultPolicy runs every command on the policy shipped in
// policies/, as a user would first try them.
func TestDefaultPolicy(t *testing.T) {
	tmp := workspace(t)
	const dir = "../../policies"
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"fixtures pass", []string{"policy", "test", dir}, 0},
		{"lint is clean in strict mode", []string{"policy", "lint", dir, "--strict"}, 0},
		{"bench", []string{"policy", "bench", dir, "--iterations", "20", "--warmup", "2"}, 0},
		{"coverage", []string{"coverage", dir, "--min", "50"}, 0},
		{"bundle", []string{"policy", "bundle", "--dir", dir, "--sign-key", "$TMP/ec.pem", "--output", "$TMP/default.tar.gz"}, 0},
		{"inspect", []string{"policy", "bundle", "inspect", "$TMP/default.tar.gz", "--verify-key", "$TMP/ec.pub"}, 0},
		{"wrong key", []string{"policy", "bundle", "inspect", "$TMP/default.tar.gz", "--verify-key", "$TMP/rsa.pub"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tmp, tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.code, r.stdout, r.stderr)
			}
		})
	}

	// The bundle the CLI wrote loads into a set that decides as the
	// directory does.
	raw, err := os.ReadFile(filepath.Join(tmp, "default.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(filepath.Join(tmp, "ec.pub"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := bundle.Load(bytes.NewReader(raw), &bundle.VerifyOptions{PublicKeyPEM: pub})
	if err != nil {
		t.Fatal(err)
	}
	res, err := set.EvalValue(t.Context(), map[string]any{"action": "orders:read"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Allow || len(res.DenyReasons) == 0 {
		t.Errorf("an input without a user was not denied with reasons: %+v", res)
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			r := run(t, "", "completion", shell)
			if r.code != 0 || !strings.Contains(r.stdout, "core") {
				t.Fatalf("exit %d, %d bytes of script\n%s", r.code, len(r.stdout), r.stderr)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"policy"}, {"policy", "--help"}, {"policy", "test", "--help"}, {"policy", "lint", "--help"},
		{"policy", "bench", "--help"}, {"policy", "bundle", "--help"}, {"policy", "bundle", "inspect", "--help"}, {"coverage", "--help"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := run(t, "", args...)
			if r.code != 0 || !strings.Contains(r.stdout, "Usage:") || r.stderr != "" {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
		})
	}
	r := run(t, "", "policy", "lint", "--help")
	for _, id := range []string{"package-not-svc-authz", "no-default-allow-false", "unknown-input-field", "shadows-builtin-root"} {
		if !strings.Contains(r.stdout, id) {
			t.Errorf("lint help does not list rule %s", id)
		}
	}
}

// TestNoKeyMaterialInOutput signs and verifies with deliberately wrong
// keys and checks that no PEM ever reaches the output.
func TestNoKeyMaterialInOutput(t *testing.T) {
	tmp := workspace(t)
	for _, args := range [][]string{
		{"policy", "bundle", "--dir", pol, "--sign-key", "$TMP/ec.pem", "--output", "$TMP/k.tar.gz", "--log-level", "debug"},
		{"policy", "bundle", "--dir", pol, "--sign-key", "$TMP/ec.pem", "--alg", "RS256", "--output", "$TMP/k2.tar.gz"},
		{"policy", "bundle", "--dir", pol, "--sign-key", "$TMP/ec.pub", "--output", "$TMP/k3.tar.gz"},
		{"policy", "bundle", "inspect", "$TMP/signed.tar.gz", "--verify-key", "$TMP/ec.pem"},
		{"policy", "bundle", "inspect", "$TMP/signed.tar.gz", "--verify-key", "$TMP/rsa.pem"},
	} {
		r := run(t, tmp, args...)
		if out := r.stdout + r.stderr; strings.Contains(out, "BEGIN") || strings.Contains(out, "PRIVATE KEY-") {
			t.Errorf("core %s printed key material:\n%s", strings.Join(args, " "), out)
		}
	}
}
