package policy_test

import (
	"context"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/plan"
	"github.com/svc-dev/svc/reason"
)

// stringPolicy filters documents with startswith, endswith and contains
// on resource fields, against values of the caller, of data and
// constants, negated too.
const stringPolicy = `package svc.authz

default allow := false

# The caller's folder, in the caller's tenant.
allow if {
	input.resource.tenant == input.user.tenant_id
	startswith(input.resource.attributes.path, input.user.claims.folder)
}

# Published PDFs: not drafts.
allow if {
	input.action == "docs:read"
	endswith(input.resource.attributes.name, ".pdf")
	not contains(input.resource.attributes.title, "draft")
}

# Shared documents, by the prefixes of data.
allow if {
	some p in data.shared_prefixes
	startswith(input.resource.id, p)
}

# High levels, in the caller's tenant.
allow if {
	input.action == "docs:update"
	input.resource.tenant == input.user.tenant_id
	not input.resource.attributes.level < 3
}

# The caller's suffix, which a token may carry as a number.
allow if {
	input.action == "docs:update"
	endswith(input.resource.attributes.name, input.user.claims.suffix)
	not startswith(input.resource.attributes.path, "/archive/")
}
`

// TestPlanStringBuiltins: a plan of startswith, endswith and contains on
// resource fields permits exactly the resources the policy allows one by
// one, on thousands of random resources whose fields hold pattern
// characters, case differences, multi-byte text, numbers, or nothing —
// under "not" too, where Rego requires the field before negating.
func TestPlanStringBuiltins(t *testing.T) {
	set, err := policy.FromModules(map[string]string{"docs.rego": stringPolicy},
		map[string]any{"shared_prefixes": []any{"shared-", "pub_%"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	users := []map[string]any{
		{"id": "u1", "tenant_id": "acme", "claims": map[string]any{"folder": "/team-a/", "suffix": "-u1.txt"}},
		{"id": "u2", "tenant_id": "acme", "claims": map[string]any{"folder": "/team-%_\\/", "suffix": 5}},
		{"id": "u3", "tenant_id": "globex", "claims": map[string]any{"folder": "/Équipe/"}},
		{"id": "u4", "tenant_id": "acme", "claims": map[string]any{"folder": "", "suffix": ""}},
		{"id": "u5", "tenant_id": "acme", "claims": map[string]any{"folder": true}},
	}
	values := map[string][]any{
		"path": {"/team-a/x", "/team-A/x", "/team-a", "/team-%_\\/y", "/team-ab_\\/y", "/Équipe/plan", "/équipe/plan",
			"/archive/a.pdf", "", 5, true},
		"name":  {"a.pdf", "a.PDF", "b.txt", ".pdf", "x-u1.txt", "x-U1.txt", "5", "x5", "日本.pdf", 5, 1.5},
		"title": {"draft", "Draft", "final", "a draft %", "drafts", "DRAFT", "", 7},
		"level": {1, 3, 5, "2"},
	}
	ids := []string{"shared-1", "SHARED-2", "doc-3", "pub_%x", "pubx%x", "pub_x", "shared"}
	tenants := []string{"acme", "globex"}
	rng := rand.New(rand.NewPCG(3, 5))
	rows := make([]plan.Row, 3000)
	for i := range rows {
		r := plan.Row{ID: ids[rng.IntN(len(ids))], Tenant: tenants[rng.IntN(len(tenants))], Attributes: map[string]any{}}
		for _, k := range slices.Sorted(maps.Keys(values)) {
			vs := values[k]
			// A NULL column is a missing attribute.
			switch rng.IntN(6) {
			case 0:
			default:
				r.Attributes[k] = vs[rng.IntN(len(vs))]
			}
		}
		rows[i] = r
	}
	ops := map[plan.Op]int{}
	for _, user := range users {
		for _, action := range []string{"docs:read", "docs:update"} {
			in := map[string]any{"user": user, "action": action}
			p, err := set.PlanValue(ctx, in, "docs")
			if err != nil {
				t.Fatalf("%s as %s: %v", action, user["id"], err)
			}
			countOps(p.Condition, ops)
			allowed, bad := 0, 0
			for _, r := range rows {
				res := map[string]any{"type": "docs", "id": r.ID, "tenant": r.Tenant, "attributes": r.Attributes}
				withRes := maps.Clone(in)
				withRes["resource"] = res
				d, err := set.EvalValue(ctx, withRes)
				if err != nil {
					t.Fatal(err)
				}
				inPlan := p.Kind == plan.AlwaysAllowed || (p.Kind == plan.Conditional && p.Condition.Match(r))
				if d.Allow {
					allowed++
				}
				if inPlan != d.Allow {
					if bad++; bad <= 3 {
						row, _ := json.Marshal(r)
						t.Errorf("%s as %s: plan %s: row %s allowed=%v in_plan=%v", action, user["id"], p.Condition, row, d.Allow, inPlan)
					}
				}
			}
			if allowed == 0 || allowed == len(rows) {
				t.Errorf("%s as %s: %d of %d rows allowed: the rows should tell plans apart", action, user["id"], allowed, len(rows))
			}
		}
	}
	for _, op := range []plan.Op{plan.StartsWith, plan.EndsWith, plan.Contains} {
		if ops[op] == 0 {
			t.Errorf("no plan holds %s: %v", op, ops)
		}
	}
}

func countOps(c *plan.Condition, ops map[plan.Op]int) {
	if c == nil {
		return
	}
	ops[c.Op]++
	for _, a := range c.Args {
		countOps(a, ops)
	}
	countOps(c.Arg, ops)
}

// TestPlanStringBuiltinsRefused: a resource field as the prefix, suffix or
// substring of a known string, two fields, or a field inside another
// built-in are plan-unsupported, naming the built-in and the line.
func TestPlanStringBuiltinsRefused(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`startswith("/team-a/report", input.resource.attributes.prefix)`, "startswith with a field of the resource as its second argument"},
		{`endswith(input.user.claims.name, input.resource.id)`, "endswith with a field of the resource as its second argument"},
		{`contains(input.resource.attributes.title, input.resource.attributes.word)`, "contains of two fields of the resource"},
		{`startswith(input.resource.attributes.meta.path, "/a")`, "startswith of something other than the resource's id, tenant or one attribute"},
		{`startswith(lower(input.resource.attributes.path), "/a")`, "startswith of something other than"},
		{`contains(input.resource.attributes.title, input.resource.attributes)`, "a reference to the resource other than"},
	} {
		set, err := policy.FromModules(map[string]string{"p.rego": "package svc.authz\n\ndefault allow := false\n\nallow if {\n\t" + tc.body + "\n}\n"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = set.PlanValue(context.Background(), map[string]any{"user": map[string]any{"claims": map[string]any{"name": "x"}}}, "docs")
		if reason.Of(err, "") != reason.PlanUnsupported || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "p.rego:6") {
			t.Errorf("%s: err = %v, want plan-unsupported with %q at p.rego:6", tc.body, err, tc.want)
		}
	}
}

// TestPlanNullComparisons: a row's NULL column is an attribute left out
// of the input, for which "== null" is undefined and "!= null" too; no
// row holds a present null. So a plan of "== null" lists no row, "in"
// ignores a null member, and their negations list every row, as the
// policy answers row by row.
func TestPlanNullComparisons(t *testing.T) {
	rows := []plan.Row{
		{ID: "missing", Tenant: "acme", Attributes: map[string]any{}},
		{ID: "t", Tenant: "acme", Attributes: map[string]any{"tag": "t", "deleted_at": "2026-01-01"}},
		{ID: "u", Tenant: "acme", Attributes: map[string]any{"tag": "u", "deleted_at": 0}},
	}
	for _, body := range []string{
		`input.resource.attributes.deleted_at == null`,
		`null == input.resource.attributes.deleted_at`,
		`input.resource.attributes.deleted_at != null`,
		`input.resource.attributes.tag in {null, "t"}`,
		`input.resource.attributes.tag in [null]`,
		`not input.resource.attributes.deleted_at == null`,
		`not input.resource.attributes.tag in {null, "t"}`,
	} {
		set, err := policy.FromModules(map[string]string{"p.rego": "package svc.authz\n\ndefault allow := false\n\nallow if {\n\t" + body + "\n}\n"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		in := map[string]any{"action": "orders:read", "user": map[string]any{"id": "u1"}}
		p, err := set.PlanValue(context.Background(), in, "orders")
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		for _, r := range rows {
			withRes := maps.Clone(in)
			withRes["resource"] = map[string]any{"type": "orders", "id": r.ID, "tenant": r.Tenant, "attributes": r.Attributes}
			d, err := set.EvalValue(context.Background(), withRes)
			if err != nil {
				t.Fatal(err)
			}
			inPlan := p.Kind == plan.AlwaysAllowed || (p.Kind == plan.Conditional && p.Condition.Match(r))
			if inPlan != d.Allow {
				t.Errorf("%s: plan %s %s: row %s allowed=%v in_plan=%v", body, p.Kind, p.Condition, r.ID, d.Allow, inPlan)
			}
		}
	}
}

// TestPlanInexactNumbers: a bound that a double cannot carry exactly is
// plan-unsupported: as a SQL parameter or in the API's JSON it would be
// rounded, and the rows on either side of it would be listed against the
// policy's answer. Numbers a double reads back exactly plan as before.
func TestPlanInexactNumbers(t *testing.T) {
	for _, tc := range []struct {
		n  string
		ok bool
	}{
		{"9007199254740993", false},
		{"9007199254740993.5", false},
		{"18446744073709551615", false},
		{"9007199254740992", true},
		{"0.1", true},
		{"-12.75", true},
		{"100", true},
	} {
		set, err := policy.FromModules(map[string]string{"p.rego": "package svc.authz\n\ndefault allow := false\n\nallow if {\n\tinput.resource.attributes.amount <= " + tc.n + "\n}\n"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = set.PlanValue(context.Background(), map[string]any{"action": "orders:read"}, "orders")
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", tc.n, err)
		case !tc.ok && (reason.Of(err, "") != reason.PlanUnsupported || !strings.Contains(err.Error(), tc.n)):
			t.Errorf("%s: err = %v, want plan-unsupported naming the number", tc.n, err)
		}
	}
}
