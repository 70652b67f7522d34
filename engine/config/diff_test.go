package config

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func parseFile(t *testing.T, path string) Config {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	format, err := FormatOf(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data, format, path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDiffTwins: the TOML file and its YAML twin are equal key by key.
func TestDiffTwins(t *testing.T) {
	a, b := parseFile(t, "testdata/full.toml"), parseFile(t, "testdata/full.yaml")
	if d := Diff(a, b); len(d) != 0 {
		t.Errorf("full.toml and full.yaml differ: %+v", d)
	}
	if n := len(a.Flatten()); n < 40 {
		t.Errorf("full.toml flattens to %d keys, want every key it sets", n)
	}
}

func TestDiff(t *testing.T) {
	base := parseFile(t, "testdata/full.toml")
	changed := base
	changed.SDK.FailMode = FailOpen
	changed.SDK.JWKSURL = "https://idp.example.com/jwks?api_key=s3cret"
	changed.Tenants = map[string]Tenant{"AcMe": {Plan: "enterprise"}, "initech": {Plan: "team"}}
	changed.JWT.Audiences = nil
	base.SDK.ServiceName = "https://u:one@h.example/?k=one"
	changed.SDK.ServiceName = "https://u:two@h.example/?k=two"

	got := Diff(base, changed)
	str := func(s string) *string { return &s }
	want := []Difference{
		{Key: "jwt.audiences", A: str(`["orders", "billing"]`)},
		{Key: "sdk.fail_mode", A: str(`"closed"`), B: str(`"open"`)},
		{Key: "sdk.jwks_url", A: str(`"https://idp.example.com/.well-known/jwks.json"`), B: str(`"https://idp.example.com/jwks?api_key=REDACTED"`)},
		{Key: "sdk.service_name", A: str(`"https://REDACTED@h.example/?k=REDACTED"`), B: str(`"https://REDACTED@h.example/?k=REDACTED"`), Redacted: true},
		{Key: "tenants.globex.plan", A: str(`"free"`)},
		{Key: "tenants.initech.plan", B: str(`"team"`)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Diff (-want +got):\n%s", diff)
	}
	for _, d := range got {
		if d.B != nil && strings.Contains(*d.B, "s3cret") {
			t.Errorf("a difference shows a URL credential: %s", *d.B)
		}
	}
}
