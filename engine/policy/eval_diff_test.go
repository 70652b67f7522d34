package policy_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/policytest"
)

// regoDecision evaluates the decision query of set through rego, as Eval
// did before it evaluated through topdown directly: the reference the
// direct evaluation must agree with.
func regoDecision(t testing.TB, set *policy.Set) func(input ast.Value) (policy.Result, error) {
	t.Helper()
	pq, err := rego.New(
		rego.Query(`allow := [x | x := data.svc.authz.allow]; reasons := [x | x := data.svc.authz.deny_reasons]`),
		rego.Compiler(set.Compiler()),
		rego.Store(set.Storage()),
	).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return func(input ast.Value) (policy.Result, error) {
		rs, err := pq.Eval(context.Background(), rego.EvalParsedInput(input))
		if err != nil {
			return policy.Result{}, err
		}
		if len(rs) != 1 {
			t.Fatalf("reference query returned %d results", len(rs))
		}
		res := policy.Result{DenyReasons: []string{}}
		if a := rs[0].Bindings["allow"].([]any); len(a) > 0 {
			res.Allow, _ = a[0].(bool)
		}
		if r := rs[0].Bindings["reasons"].([]any); len(r) > 0 {
			for _, x := range r[0].([]any) {
				res.DenyReasons = append(res.DenyReasons, x.(string))
			}
		}
		slices.Sort(res.DenyReasons)
		return res, nil
	}
}

// diffInputs are the fixture inputs of every policy, plus variations of
// each that change one part: the action, the roles, the tenant, the plan.
func diffInputs(t *testing.T) []policy.Input {
	t.Helper()
	var inputs []policy.Input
	for _, glob := range []string{"../../policies/fixtures/*.input.json", "../../examples/policies/*/fixtures/*.input.json", "../../deploy/demo/candidate-policy/fixtures/*.input.json"} {
		for _, f := range testkit.ReadGlob(t, glob) {
			var in policy.Input
			if json.Unmarshal(f.Data, &in) == nil {
				inputs = append(inputs, in)
			}
		}
	}
	if len(inputs) < 20 {
		t.Fatalf("only %d fixture inputs", len(inputs))
	}
	actions := []string{"orders:read", "orders:delete", "reports:export", "audit:read", "webhooks:create", "invoices:void", "x", "orders:*", ""}
	roles := [][]string{nil, {}, {"admin"}, {"viewer", "billing"}, {"", "editor"}, {"unknown"}}
	plans := []string{"free", "team", "enterprise", "gold", ""}
	// Inputs the nested test policy allows and denies on its claims.
	for i, level := range []any{2, 1, "2", json.Number("2.0")} {
		inputs = append(inputs, policy.Input{
			Action:   "orders:read",
			User:     policy.User{Role: "admin", Roles: []string{"admin"}, TenantID: "acme", Claims: map[string]any{"level": level, "field": "id"}},
			Resource: policy.Resource{ID: "ok", Tenant: "acme"},
			Tenant:   policy.Tenant{ID: "acme", Plan: "team"},
			Request:  &policy.Request{Method: []string{"GET", "POST"}[i%2], Headers: map[string]string{"x-allow-a": "Yes"}},
		})
	}
	var out []policy.Input
	for i, in := range inputs {
		out = append(out, in)
		v := in
		v.Action = actions[i%len(actions)]
		out = append(out, v)
		v = in
		v.User.Roles = roles[i%len(roles)]
		if len(v.User.Roles) > 0 {
			v.User.Role = v.User.Roles[0]
		}
		out = append(out, v)
		v = in
		v.User.Role = "admin"
		v.Tenant.Plan = plans[i%len(plans)]
		out = append(out, v)
		v = in
		v.Resource.Tenant = "other-" + strconv.Itoa(i)
		out = append(out, v)
	}
	return out
}

// TestEvalMatchesRego checks that evaluating through topdown directly,
// with the set's rule cache and the pruned input document, decides as
// the rego evaluation of the whole input document does, for every shipped
// and example policy and policies that use functions and `with`.
func TestEvalMatchesRego(t *testing.T) {
	dirs := []string{"../../policies", "../../examples/policies/multi-tenant-rbac", "../../examples/policies/plan-gates",
		"../../examples/policies/resource-owner", "../../examples/policies/resource-attributes", "../../deploy/demo/candidate-policy", "testdata/cache/nested"}
	sets := map[string]*policy.Set{}
	for _, d := range dirs {
		set, err := policy.Load(d)
		if err != nil {
			t.Fatal(err)
		}
		sets[d] = set
	}
	set, err := policy.FromModules(map[string]string{"with.rego": withPolicy}, map[string]any{"plans": map[string]any{"team": 1, "enterprise": 2}})
	if err != nil {
		t.Fatal(err)
	}
	sets["with"] = set
	inputs := diffInputs(t)
	for name, set := range sets {
		t.Run(name, func(t *testing.T) {
			ref := regoDecision(t, set)
			allowed := 0
			for _, in := range inputs {
				v, err := in.Value()
				if err != nil {
					t.Fatal(err)
				}
				want, wantErr := ref(v)
				if want.Allow {
					allowed++
				}
				for _, eval := range []func() (policy.Result, error){
					func() (policy.Result, error) { return set.Eval(context.Background(), in) },
					func() (policy.Result, error) { return set.EvalValue(context.Background(), v) },
				} {
					got, err := eval()
					if (err != nil) != (wantErr != nil) {
						t.Fatalf("input %+v: error %v, rego error %v", in, err, wantErr)
					}
					got.DecisionID, got.Revision = "", ""
					if diff := cmp.Diff(want, got); diff != "" {
						t.Fatalf("input %+v: decision (-rego +direct):\n%s", in, diff)
					}
				}
			}
			// Both decisions must be among the inputs for the comparison
			// to mean something.
			if allowed == 0 || allowed == len(inputs) {
				t.Errorf("%d of %d inputs allowed", allowed, len(inputs))
			}
		})
	}
}

// FuzzEvalMatchesRego decides typed inputs built from fuzzed fields with
// the default policy, through Eval (the pruned input document, the direct
// topdown query, the reused rule cache and the constant tables), and
// through rego on the whole input document: the decisions must agree.
func FuzzEvalMatchesRego(f *testing.F) {
	addFieldSeeds(f)
	set := policytest.Default(f)
	ref := regoDecision(f, set)
	f.Fuzz(func(t *testing.T, action, role, roles, userTenant, resourceTenant, tenant, plan string) {
		in := fieldsInput(action, role, roles, userTenant, resourceTenant, tenant, plan)
		v, err := in.Value()
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref(v)
		if err != nil {
			t.Fatalf("rego: %v", err)
		}
		got, err := set.Eval(context.Background(), in)
		if err != nil {
			t.Fatalf("eval %+v: %v", in, err)
		}
		got.DecisionID, got.Revision = "", ""
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("input %+v: decision (-rego +direct):\n%s", in, diff)
		}
	})
}

// withPolicy replaces input and data with `with`, which pushes frames on
// the rule cache, calls functions whose results the cache holds, and
// replaces a constant rule with `with`.
const withPolicy = `package svc.authz

default allow := false

admin_roles := {"admin"}

is_admin(roles) if {
	some r in roles
	admin_roles[r]
}

rank(plan) := data.plans[plan]

tenant_ok if input.user.tenant_id == input.resource.tenant

admin if is_admin(input.user.roles)

allow if {
	tenant_ok
	rank(input.tenant.plan) >= 1
	admin with input.user.roles as ["admin"]
	not admin with input.user.roles as []
	not is_admin(["admin"]) with data.svc.authz.admin_roles as {"root"}
	is_admin(["admin"])
	ranks := [rank(p) | some p in ["team", "enterprise", input.tenant.plan]]
	count(ranks) >= 2
}

deny_reasons contains "not-admin" if not admin
deny_reasons contains "tenant" if not tenant_ok
deny_reasons contains "plan" if {
	not rank(input.tenant.plan)
	rank("team") == 1 with data.plans.team as 1
}
`
