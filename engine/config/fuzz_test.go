package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/svc-dev/svc/internal/testkit"
)

// FuzzParse feeds arbitrary TOML and YAML to Parse: it must never panic,
// must fail only with *Error values, and a config it accepts must survive
// MarshalTOML and Parse unchanged.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"testdata/*.toml", "testdata/*.yaml"} {
		for _, file := range testkit.ReadGlob(f, pattern) {
			f.Add(file.Data, strings.HasSuffix(file.Path, ".yaml"))
		}
	}
	// Corners of the two formats that a config must carry through
	// MarshalTOML unchanged.
	for _, seed := range []string{
		"tenants: {\"a\\nb\": {plan: \"\\u0000\\t'\\\"\"}}\n",
		"tenants: {x: {plan: !!binary gIGC}}\n",
		"rate_limit: {per_tenant: {123: 5, true: 1, 'a.b': 2}}\n",
		"tenants: {a: &t {plan: p}, b: {<<: *t}}\njwt: {audiences: [\"\\u00e9\", 'b']}\n",
		"jwt: {clock_skew: 2562047h47m16.854775807s, cache_size: 9223372036854775807}\n",
	} {
		f.Add([]byte(seed), true)
	}
	f.Add([]byte("[tenants.\"a\\u0000b\"]\nplan = \"\"\"\nx\r\n\"\"\"\n[[sidecar.routes]]\npath = \"/\"\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, isYAML bool) {
		format := FormatTOML
		if isYAML {
			format = FormatYAML
		}
		cfg, err := Parse(data, format, "fuzz")
		if err != nil {
			if len(Errors(err)) == 0 || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse failed with %T %v, not with *Error values", err, err)
			}
			return
		}
		out, err := cfg.MarshalTOML()
		if err != nil {
			t.Fatalf("MarshalTOML of an accepted config: %v", err)
		}
		again, err := Parse(out, FormatTOML, "fuzz")
		if err != nil {
			t.Fatalf("Parse of the marshaled config: %v\n%s", err, out)
		}
		if diff := cmp.Diff(cfg, again, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(Config{}, "Lines")); diff != "" {
			t.Fatalf("round trip changed the config (-first +second):\n%s", diff)
		}
		if _, err := Inspect(data, format, "fuzz"); err != nil {
			t.Fatalf("Inspect rejects what Parse accepted: %v", err)
		}
	})
}
