package config

import (
	"errors"
	"testing"
)

// TestOrigin checks that a setting names where its value came from: the
// variable that set it, the file and line, or the default.
func TestOrigin(t *testing.T) {
	const toml = "# comment\n[sdk]\ntenant_id = \"acme\"\n\n[policy]\ndir = \"/etc/svc/policies\"\n\n[[sidecar.routes]]\npath = \"/a\"\nmethods = [\"GET\"]\n[[sidecar.routes]]\npath = \"/b\"\n"
	const yaml = "sdk:\n  tenant_id: acme\npolicy:\n  dir: /etc/svc/policies\n"
	fromTOML, err := Parse([]byte(toml), FormatTOML, "svc.toml")
	if err != nil {
		t.Fatal(err)
	}
	fromYAML, err := Parse([]byte(yaml), FormatYAML, "svc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	withEnv, err := Load("", envOf(map[string]string{"SVC_POLICY_DIR": "/srv/policies"}))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		key  string
		want string
	}{
		{"toml key", fromTOML, "policy.dir", "svc.toml:6"},
		{"toml table", fromTOML, "sdk.tenant_id", "svc.toml:3"},
		{"toml array table", fromTOML, "sidecar.routes[1].path", "svc.toml:12"},
		{"toml list element", fromTOML, "sidecar.routes[0].methods[0]", "svc.toml:10"},
		{"toml key not in the file", fromTOML, "sdk.fail_mode", "svc.toml"},
		{"yaml key", fromYAML, "policy.dir", "svc.yaml:4"},
		{"environment", withEnv, "policy.dir", "SVC_POLICY_DIR"},
		{"default", withEnv, "sdk.fail_mode", "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.Origin(tt.key); got != tt.want {
				t.Errorf("Origin(%q) = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
	if got, want := fromTOML.Setting("policy.dir"), "policy.dir (svc.toml:6)"; got != want {
		t.Errorf("Setting = %q, want %q", got, want)
	}
}

// TestUnknownKeySuggestion checks that an unknown key names the nearest
// known key, in TOML and in YAML.
func TestUnknownKeySuggestion(t *testing.T) {
	tests := []struct {
		name, format, doc, want string
	}{
		{"misspelled", FormatTOML, "[sdk]\njwks_ur = \"https://idp/jwks\"\n", "svc:2:1: sdk.jwks_ur: unknown key (did you mean sdk.jwks_url?)"},
		{"misspelled yaml", FormatYAML, "sdk:\n  jwks_ur: https://idp/jwks\n", "svc:2:3: sdk.jwks_ur: unknown key (did you mean sdk.jwks_url?)"},
		{"wrong table", FormatTOML, "[sdk]\nclock_skew = \"1s\"\n", "svc:2:1: sdk.clock_skew: unknown key (did you mean jwt.clock_skew?)"},
		{"misspelled table", FormatTOML, "[polcy]\ndir = \"p\"\n", "svc:1:2: polcy: unknown key (did you mean policy?)"},
		{"nothing close", FormatTOML, "[sdk]\nfrobnicate = 1\n", "svc:2:1: sdk.frobnicate: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), tt.format, "svc")
			if !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("err = %v, want an unknown key", err)
			}
			if errs := Errors(err); len(errs) != 1 || errs[0].Error() != tt.want {
				t.Errorf("err = %v\nwant %s", err, tt.want)
			}
		})
	}
}
