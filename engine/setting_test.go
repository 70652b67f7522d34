package engine_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
)

// TestPolicyDirErrorNamesTheSetting checks that a policy directory that
// cannot be loaded is reported with the setting and where it was set.
func TestPolicyDirErrorNamesTheSetting(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken")
	if err := os.Mkdir(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, filepath.Join(broken, "authz.rego"), []byte("package svc.authz\n\nallow if {\n"))
	file := filepath.Join(dir, "svc.toml")
	testkit.WriteFile(t, file, []byte("[sdk]\ntenant_id = \"acme\"\n\n[policy]\ndir = \"/nonexistent/policies\"\n"))
	fromFile, err := config.Load(file, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	fromEnv, err := config.Load("", func(k string) (string, bool) {
		if k == "SVC_POLICY_DIR" {
			return broken, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cfg     config.Config
		want    string
		problem bool
	}{
		{"missing directory from the file", fromFile, "policy.dir (" + file + ":5): policy directory /nonexistent/policies does not exist", true},
		{"broken policy from the environment", fromEnv, "policy.dir (SVC_POLICY_DIR): " + broken + "/authz.rego:", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := engine.New(tt.cfg, engine.Deps{})
			if err == nil {
				t.Fatal("engine.New succeeded")
			}
			if got := err.Error(); len(got) < len(tt.want) || got[:len(tt.want)] != tt.want {
				t.Errorf("err = %q\nwant it to start with %q", got, tt.want)
			}
			var se *engine.SettingError
			if !errors.As(err, &se) || se.Key != "policy.dir" {
				t.Errorf("err is not a *SettingError for policy.dir: %#v", err)
			}
			var pe *policy.Error
			if tt.problem && !errors.As(err, &pe) {
				t.Errorf("err does not wrap the *policy.Error: %#v", err)
			}
		})
	}
}

// TestJWKSFailureNamesTheSetting: a JWKS that cannot be fetched is logged
// with the setting that points at it and where it was set.
func TestJWKSFailureNamesTheSetting(t *testing.T) {
	url := "http://" + testkit.DeadAddr(t) + "/jwks.json"
	cfg, err := config.Load("", func(k string) (string, bool) {
		if k == "SVC_JWKS_URL" {
			return url, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	e, err := engine.New(cfg, engine.Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// At start there are no keys yet: the line says so.
	const want = `msg="jwks fetch failed; no copy yet, retrying (tokens are refused with jwks-unavailable until then)" setting="sdk.jwks_url (SVC_JWKS_URL)"`
	testkit.Poll(t, 10*time.Second, "a log line with "+want, func() (bool, string) {
		l := logs.String()
		return strings.Contains(l, want), "\n" + l
	})
}
