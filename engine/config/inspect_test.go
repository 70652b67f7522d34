package config

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInspect(t *testing.T) {
	const defaultUnset = "rate_limit.default_rpm unset: 1000 rpm applies"
	tests := []struct {
		name, format, data string
		keys               int
		warnings           []string
		wantErr            bool
	}{
		{name: "full toml", format: FormatTOML, data: string(readFile(t, "testdata/full.toml")), keys: 119},
		{name: "full yaml", format: FormatYAML, data: string(readFile(t, "testdata/full.yaml")), keys: 119},
		{name: "empty", format: FormatTOML, data: "", keys: 0, warnings: []string{defaultUnset}},
		{name: "tenant without budget", format: FormatTOML,
			data: "[tenants.AcMe]\nplan = \"pro\"\n[tenants.globex]\nplan = \"free\"\n[rate_limit.per_tenant]\nglobex = 10\n",
			keys: 3, warnings: []string{defaultUnset, "rate_limit.per_tenant.AcMe unset: default 1000 rpm applies"}},
		{name: "tenant without budget, default set", format: FormatTOML,
			data: "[tenants.AcMe]\n[tenants.\"a.b\"]\n[rate_limit]\ndefault_rpm = 600\n",
			keys: 1, warnings: []string{
				"rate_limit.per_tenant.AcMe unset: default 600 rpm applies",
				`rate_limit.per_tenant."a.b" unset: default 600 rpm applies`}},
		{name: "rate limiting disabled", format: FormatTOML,
			data: "[tenants.AcMe]\n[rate_limit]\ndisabled = true\n", keys: 1},
		{name: "yaml null default", format: FormatYAML,
			data: "tenants: {x: {plan: a}}\nrate_limit: {default_rpm: ~, per_tenant: {x: 5}}\n",
			keys: 2, warnings: []string{defaultUnset}},
		{name: "lists count once", format: FormatYAML,
			data: "jwt: {audiences: [a, b, c]}\nsidecar: {routes: []}\nrate_limit: {default_rpm: 5}\n", keys: 3},
		{name: "yaml keys that are not strings", format: FormatYAML,
			data: "tenants: {123: {plan: a}, true: {plan: b}}\nrate_limit: {default_rpm: 5, per_tenant: {123: 5}}\n",
			keys: 4, warnings: []string{"rate_limit.per_tenant.true unset: default 5 rpm applies"}},
		{name: "unknown key", format: FormatTOML, data: "[rate_limit]\ndefault_rpn = 5\n", wantErr: true},
		{name: "invalid but decodes", format: FormatTOML,
			data: "[sdk]\nfail_mode = \"closed\"\n", keys: 1, warnings: []string{defaultUnset}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Inspect([]byte(tt.data), tt.format, "svc."+tt.format)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Inspect: err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("err %v is not an *Error", err)
			}
			if rep.KeyCount != tt.keys {
				t.Errorf("KeyCount = %d, want %d", rep.KeyCount, tt.keys)
			}
			if diff := cmp.Diff(tt.warnings, rep.Warnings); diff != "" {
				t.Errorf("Warnings (-want +got):\n%s", diff)
			}
		})
	}
}
