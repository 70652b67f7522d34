package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/fixture"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
)

// TestTablesSplitIntoFiles: tables too large for one file are split over
// files of at most the limit, which a policy directory and a signed
// bundle merge back into whole tables the policy reads by key.
func TestTablesSplitIntoFiles(t *testing.T) {
	const limit = 40 << 10
	tb := genTables(1200, 1)
	files, err := tb.files(limit)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) <= 3 {
		t.Fatalf("%d files; want the tables split over more than one each", len(files))
	}
	for name, b := range files {
		if len(b) > limit {
			t.Errorf("%s: %d bytes, more than %d", name, len(b), limit)
		}
	}
	files["authz.rego"] = []byte(tablesPolicy)
	dir := t.TempDir()
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		testkit.WriteFileMode(t, p, b, 0o644)
	}
	fromDir, err := policy.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSigner()
	if err != nil {
		t.Fatal(err)
	}
	archive, err := writeBundle(files, s, "test")
	if err != nil {
		t.Fatal(err)
	}
	fromBundle, err := bundle.Load(bytes.NewReader(archive), &bundle.VerifyOptions{PublicKeyPEM: s.pubPEM})
	if err != nil {
		t.Fatal(err)
	}
	other, err := newSigner()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.Load(bytes.NewReader(archive), &bundle.VerifyOptions{PublicKeyPEM: other.pubPEM}); err == nil {
		t.Error("the bundle verified with another key")
	}
	last, _ := tb.input()
	for name, set := range map[string]*policy.Set{"directory": fromDir, "bundle": fromBundle} {
		tables := set.Data()["svc"].(map[string]any)["tables"].(map[string]any)
		for table, want := range map[string]int{"tenants": len(tb.tenants), "roles": len(tb.roles), "plans": len(tb.plans)} {
			if got := len(tables[table].(map[string]any)); got != want {
				t.Errorf("%s: table %s has %d entries, want %d", name, table, got, want)
			}
		}
		for _, raw := range [][]byte{last, firstTenantInput()} {
			in, _, err := fixture.BenchInput("input", raw)
			if err != nil {
				t.Fatal(err)
			}
			res, err := set.EvalValue(context.Background(), in)
			if err != nil || !res.Allow {
				t.Errorf("%s: %s: allow %v, %v, reasons %v", name, raw, res.Allow, err, res.DenyReasons)
			}
		}
	}
}

// TestPolicySizeRules: the generated rules compile, the benchmark's input
// is allowed by both forms, and the lint tells the forms apart.
func TestPolicySizeRules(t *testing.T) {
	for _, arg := range []string{"10", "10u", "11"} {
		indexed := !strings.HasSuffix(arg, "u")
		n := 10
		if arg == "11" {
			n = 11
		}
		set, err := policy.FromModules(map[string]string{"authz.rego": genRules(n, indexed)}, nil)
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		in, _, err := fixture.BenchInput("input", policySizeInput(n))
		if err != nil {
			t.Fatal(err)
		}
		if res, err := set.EvalValue(context.Background(), in); err != nil || !res.Allow {
			t.Errorf("%s: allow %v, %v", arg, res.Allow, err)
		}
	}
}

// TestWriteDoc: the section between the markers is replaced, the rest of
// the page kept, and a second write leaves one section.
func TestWriteDoc(t *testing.T) {
	p := filepath.Join(t.TempDir(), "b.md")
	testkit.WriteFileMode(t, p, []byte("# Benchmarks\n\nbefore\n\n"+docBegin+"\nold\n"+docEnd+"\n\nafter\n"), 0o644)
	res := []result{{Row: "data", What: "w", Figures: "f | g", Bound: "b", Met: true, CurveUnit: "µs", Curve: []plotPoint{{"100", 10}, {"1M", 20}}}}
	for range 2 {
		if err := writeDoc(p, res, options{}); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(p)
	s := string(b)
	for _, want := range []string{"before", "after", `f \| g`, "b ✓", "`go run ./scripts/benchscale -row data`", "1M  " + strings.Repeat("█", 50) + " 20.0"} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "old") || strings.Count(s, docBegin) != 1 {
		t.Errorf("section not replaced once:\n%s", s)
	}
}

// TestWriteDocRow: a row written alone replaces its line and its curve
// in the section, and leaves the other rows as they were.
func TestWriteDocRow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.md")
	testkit.WriteFileMode(t, path, []byte("# Benchmarks\n\nbefore\n"), 0o644)
	old := []result{
		{Row: "data", What: "data row", Figures: "old data", Bound: "b", Met: true, Curve: []plotPoint{{"x", 1}}, CurveUnit: "u"},
		{Row: "bundles", What: "bundles row", Figures: "old bundles", Bound: "b", Curve: []plotPoint{{"1 MB", 12}, {"10 MB", 14}}, CurveUnit: "u"},
		{Row: "tokens", What: "tokens row", Figures: "old tokens", Bound: "b", Met: true, Curve: []plotPoint{{"idle", 3}}, CurveUnit: "u"},
	}
	if err := writeDoc(path, old, options{}); err != nil {
		t.Fatal(err)
	}
	bundles := old[1]
	bundles.Figures, bundles.Met, bundles.Curve = "new bundles", true, []plotPoint{{"1 MB", 6}, {"10 MB", 7}}
	if err := writeDocRow(path, bundles, options{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, want := range []string{"old data", "old tokens", "new bundles", "measured alone", "10 MB ", " 7.00\n"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the document lacks %q:\n%s", want, doc)
		}
	}
	for _, gone := range []string{"old bundles", " 14.0\n"} {
		if strings.Contains(doc, gone) {
			t.Errorf("the document still holds %q:\n%s", gone, doc)
		}
	}
	if n := strings.Count(doc, "| bundles |"); n != 1 {
		t.Errorf("%d bundles rows, want 1", n)
	}
	if err := writeDocRow(path, result{Row: "nosuch"}, options{}); err == nil {
		t.Error("a row the table does not hold was written")
	}
}

// TestTenantsPolicy: the tenants row's policy allows a user's read of a
// resource of its own tenant, and refuses another tenant's, with a
// reason; its decision cache keys on the tenant. The roles policy does
// neither.
func TestTenantsPolicy(t *testing.T) {
	set, err := policy.FromModules(map[string]string{"authz.rego": tenantsPolicy}, nil)
	if err != nil {
		t.Fatal(err)
	}
	user := policy.User{ID: "u00001", TenantID: "tenant-00001", Roles: []string{"viewer", "editor"}}
	for _, tc := range []struct {
		tenant string
		allow  bool
	}{{"tenant-00001", true}, {"tenant-00002", false}} {
		in := policy.Input{Action: "orders:read", User: user, Resource: policy.Resource{Type: "orders", ID: "o-1", Tenant: tc.tenant}}
		res, err := set.Decide(context.Background(), in)
		if err != nil || res.Allow != tc.allow || res.Allow != (len(res.DenyReasons) == 0) {
			t.Errorf("resource of %s: allow %v, reasons %v, %v", tc.tenant, res.Allow, res.DenyReasons, err)
		}
	}
	paths, disabled := set.CacheKeys()
	if keys := strings.Join(paths, " "); disabled != "" || !strings.Contains(keys, "tenant_id") {
		t.Errorf("the decision cache keys on %q (disabled: %q), not the user's tenant", keys, disabled)
	}
	// Without the tenant rule, the tenant is neither decided on nor a key.
	roles, err := policy.FromModules(map[string]string{"authz.rego": rolesPolicy}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := policy.Input{Action: "orders:read", User: user, Resource: policy.Resource{Type: "orders", ID: "o-1", Tenant: "tenant-00002"}}
	if res, err := roles.Decide(context.Background(), in); err != nil || !res.Allow {
		t.Errorf("roles policy: allow %v, %v", res.Allow, err)
	}
	paths, _ = roles.CacheKeys()
	if keys := strings.Join(paths, " "); strings.Contains(keys, "tenant") {
		t.Errorf("the roles policy's decision cache keys on %q", keys)
	}
}
