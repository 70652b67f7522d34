package policy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/util"

	"github.com/svc-dev/svc/engine/policy"
)

const tablePolicy = `package svc.authz

default allow := false

allow if data.svc.tables.roles[input.user.role][input.action]

deny_reasons := set() if {
	allow == true
} else := {"policy-denied"}
`

// TestDecodedJSONAndRevision: data decoded from JSON and handed over with
// DecodedJSON decides as a copy of it does, with the same default
// revision; Revision replaces that digest, and the directory loader,
// which decodes its data files itself, agrees with both.
func TestDecodedJSONAndRevision(t *testing.T) {
	raw := []byte(`{"svc":{"tables":{"roles":{"editor":{"orders:update":true},"viewer":{"orders:read":true}}}}}`)
	decode := func() map[string]any {
		var v map[string]any
		if err := util.UnmarshalJSON(raw, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	mods := map[string]string{"authz.rego": tablePolicy}
	copied, err := policy.FromModules(mods, decode())
	if err != nil {
		t.Fatal(err)
	}
	kept, err := policy.FromModules(mods, decode(), policy.DecodedJSON())
	if err != nil {
		t.Fatal(err)
	}
	named, err := policy.FromModules(mods, decode(), policy.DecodedJSON(), policy.Revision("bundle-7"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "authz.rego"), []byte(tablePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "svc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "svc", "data.json"), []byte(`{"tables":{"roles":{"editor":{"orders:update":true},"viewer":{"orders:read":true}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := policy.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(copied.Revision(), "sha256:") || kept.Revision() != copied.Revision() {
		t.Errorf("revisions: copied %q, kept %q; want the same content digest", copied.Revision(), kept.Revision())
	}
	// The loader names the module by its path.
	byPath := must(policy.FromModules(map[string]string{filepath.ToSlash(filepath.Join(dir, "authz.rego")): tablePolicy}, decode()))
	if loaded.Revision() != byPath.Revision() {
		t.Errorf("loaded from a directory: revision %q, want %q", loaded.Revision(), byPath.Revision())
	}
	if named.Revision() != "bundle-7" {
		t.Errorf("Revision option: revision %q, want bundle-7", named.Revision())
	}
	if rev := must(policy.FromModules(mods, nil, policy.Revision(""))).Revision(); !strings.HasPrefix(rev, "sha256:") {
		t.Errorf("an empty Revision keeps the content digest; got %q", rev)
	}
	for _, set := range []*policy.Set{copied, kept, named, loaded} {
		for _, tc := range []struct {
			role, action string
			allow        bool
		}{{"editor", "orders:update", true}, {"viewer", "orders:update", false}} {
			res, err := set.Eval(context.Background(), policy.Input{Action: tc.action, User: policy.User{Role: tc.role, Roles: []string{tc.role}}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allow != tc.allow {
				t.Errorf("%s %s: allow %v, want %v", tc.role, tc.action, res.Allow, tc.allow)
			}
		}
	}
}

func must(s *policy.Set, err error) *policy.Set {
	if err != nil {
		panic(err)
	}
	return s
}
