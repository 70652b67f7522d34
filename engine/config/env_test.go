package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/internal/testkit"
)

func TestEnvVarsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, ev := range EnvVars() {
		t.Run(ev.Name, func(t *testing.T) {
			if !strings.HasPrefix(ev.Name, "SVC_") || seen[ev.Name] {
				t.Errorf("name %q is not a new SVC_ variable", ev.Name)
			}
			seen[ev.Name] = true
			typ, ok := typeAt(configType, "toml", strings.Split(ev.Key, "."))
			if ev.EnvOnly {
				if ok {
					t.Errorf("key %q is environment only but is a config key too", ev.Key)
				}
			} else if !ok {
				t.Errorf("key %q is not a config key", ev.Key)
			} else if d := describe(typ); d == "a table" || d == "a list of tables" {
				t.Errorf("key %q names %s, not a value", ev.Key, d)
			}
			if ev.Help == "" || !strings.HasSuffix(ev.Help, ".") {
				t.Errorf("help %q is not a sentence", ev.Help)
			}
			if envKey(ev.Name) != ev.Key {
				t.Errorf("envKey(%q) = %q, want %q", ev.Name, envKey(ev.Name), ev.Key)
			}
		})
	}
	reference := string(readFile(t, "../../docs/configuration.md"))
	for name := range seen {
		if !strings.Contains(reference, "`"+name+"`") {
			t.Errorf("%s is missing from docs/configuration.md (run make docs)", name)
		}
	}
	vars := EnvVars()
	vars[0].Name = "CHANGED"
	if EnvVars()[0].Name == "CHANGED" {
		t.Error("EnvVars hands out the table itself")
	}
}

// TestEnvOnlyKeyInFile: a file that sets an environment-only key is
// refused with a message that names the variable to use instead, and the
// help of the variable says it has no file key.
func TestEnvOnlyKeyInFile(t *testing.T) {
	base := map[string]string{
		"toml": "[sdk]\ntenant_id = \"acme\"\n[sdk.saml]\nentity_id = \"urn:sp\"\nacs_url = \"https://sp.example/acs\"\nidp_metadata_file = \"/x.xml\"\n",
		"yaml": "sdk:\n  tenant_id: acme\n  saml:\n    entity_id: urn:sp\n    acs_url: https://sp.example/acs\n    idp_metadata_file: /x.xml\n",
	}
	n := 0
	for _, ev := range EnvVars() {
		if !ev.EnvOnly {
			continue
		}
		n++
		if !strings.Contains(ev.Help, "environment only") {
			t.Errorf("%s: help %q does not say it is environment only", ev.Name, ev.Help)
		}
		name := ev.Key[strings.LastIndex(ev.Key, ".")+1:]
		for format, doc := range base {
			line := name + " = \"-----BEGIN X-----\"\n"
			if format == "yaml" {
				line = "    " + name + ": \"-----BEGIN X-----\"\n"
			}
			path := testkit.TempFile(t, "svc."+format, []byte(doc+line))
			_, err := Load(path, envOf(nil))
			if err == nil {
				t.Fatalf("%s: a file that sets %s loaded", format, ev.Key)
			}
			for _, want := range []string{ev.Key, ev.Name, "never inline in a file"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: error %q does not mention %q", format, err, want)
				}
			}
		}
	}
	if n != 2 {
		t.Errorf("%d environment-only variables, want 2 (the SP key pair's PEM text)", n)
	}
}

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		want      []string
		overrides map[string]string
	}{
		{name: "nothing set", env: nil},
		{name: "empty values ignored", env: map[string]string{"SVC_FAIL_MODE": "", "SVC_RATE_LIMIT_DEFAULT_RPM": ""}},
		{name: "good values", env: map[string]string{"SVC_FAIL_MODE": "closed", "SVC_RATE_LIMIT_DEFAULT_RPM": "0"},
			overrides: map[string]string{"sdk.fail_mode": "SVC_FAIL_MODE", "rate_limit.default_rpm": "SVC_RATE_LIMIT_DEFAULT_RPM"}},
		{name: "bad fail mode", env: map[string]string{"SVC_FAIL_MODE": "maybe"},
			want:      []string{`SVC_FAIL_MODE: must be "open" or "closed", got "maybe"`},
			overrides: map[string]string{"sdk.fail_mode": "SVC_FAIL_MODE"}},
		{name: "bad log level", env: map[string]string{"SVC_LOG_LEVEL": "loud"},
			want:      []string{`SVC_LOG_LEVEL: must be one of trace, debug, info, warn, error, got "loud"`},
			overrides: map[string]string{"log.level": "SVC_LOG_LEVEL"}},
		{name: "rpm not a number", env: map[string]string{"SVC_RATE_LIMIT_DEFAULT_RPM": "1k"},
			want:      []string{`SVC_RATE_LIMIT_DEFAULT_RPM: must be a non-negative integer, got "1k"`},
			overrides: map[string]string{"rate_limit.default_rpm": "SVC_RATE_LIMIT_DEFAULT_RPM"}},
		{name: "rpm negative", env: map[string]string{"SVC_RATE_LIMIT_DEFAULT_RPM": "-1"},
			want:      []string{`SVC_RATE_LIMIT_DEFAULT_RPM: must be a non-negative integer, got "-1"`},
			overrides: map[string]string{"rate_limit.default_rpm": "SVC_RATE_LIMIT_DEFAULT_RPM"}},
		{name: "bad cache max age", env: map[string]string{"SVC_JWT_CACHE_MAX_AGE": "10"},
			want:      []string{`SVC_JWT_CACHE_MAX_AGE: must be a non-negative duration such as "10m", got "10"`},
			overrides: map[string]string{"jwt.cache_max_age": "SVC_JWT_CACHE_MAX_AGE"}},
		{name: "bad trust forwarded for", env: map[string]string{"SVC_TRUST_FORWARDED_FOR": "yes"},
			want:      []string{`SVC_TRUST_FORWARDED_FOR: must be true or false, got "yes"`},
			overrides: map[string]string{"sidecar.trust_forwarded_for": "SVC_TRUST_FORWARDED_FOR"}},
		{name: "bad check proxy", env: map[string]string{"SVC_CHECK_PROXY": "apache"},
			want:      []string{`SVC_CHECK_PROXY: must be "auto", "nginx", "forwarded" or "envoy", got "apache"`},
			overrides: map[string]string{"sidecar.check_proxy": "SVC_CHECK_PROXY"}},
		{name: "all bad ones reported", env: map[string]string{"SVC_FAIL_MODE": "x", "SVC_LOG_LEVEL": "y", "SVC_TENANT_ID": "t"},
			want: []string{`SVC_FAIL_MODE: must be "open" or "closed", got "x"`,
				`SVC_LOG_LEVEL: must be one of trace, debug, info, warn, error, got "y"`},
			overrides: map[string]string{"sdk.fail_mode": "SVC_FAIL_MODE", "log.level": "SVC_LOG_LEVEL", "sdk.tenant_id": "SVC_TENANT_ID"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{RateLimit: RateLimit{DefaultRPM: 7}}
			err := FromEnv(&cfg, envOf(tt.env))
			var got []string
			for _, e := range Errors(err) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.overrides, cfg.Overrides); diff != "" {
				t.Errorf("Overrides (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFromEnvDefaultLookup(t *testing.T) {
	t.Setenv("SVC_SERVICE_NAME", "from-process-env")
	var cfg Config
	if err := FromEnv(&cfg, nil); err != nil {
		t.Fatal(err)
	}
	if cfg.SDK.ServiceName != "from-process-env" {
		t.Errorf("service_name = %q, want the process environment's value", cfg.SDK.ServiceName)
	}
}
