package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/policytest"
)

// FuzzEvalValue feeds arbitrary JSON documents to the default policy as
// input. Evaluation must never fail or panic, and the decision must be
// coherent: allowed exactly when there is no deny reason, and a denial
// always explained by a specific reason rather than the fallback. Since
// the default policy computes its reasons only for denied requests, the
// reasons are also computed for allowed ones here: there must be none.
func FuzzEvalValue(f *testing.F) {
	for _, seed := range testkit.ReadGlob(f, "../../policies/fixtures/*.input.json") {
		f.Add(seed.Data)
	}
	for _, s := range []string{`null`, `"orders:read"`, `[]`, `{"action":{"a":1},"user":[]}`, `{"user":{"roles":"admin"}}`} {
		f.Add([]byte(s))
	}
	set := policytest.Default(f)
	explained, err := rego.New(
		rego.Query("x := data.svc.authz.explained"),
		rego.Compiler(set.Compiler()),
		rego.Store(set.Storage()),
	).PrepareForEval(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var input any
		if dec.Decode(&input) != nil {
			t.Skip("not JSON")
		}
		res, err := set.EvalValue(context.Background(), input)
		if err != nil {
			t.Fatalf("eval of %s: %v", raw, err)
		}
		if res.Allow != (len(res.DenyReasons) == 0) {
			t.Fatalf("allow=%v with reasons %q for %s", res.Allow, res.DenyReasons, raw)
		}
		if slices.Contains(res.DenyReasons, "policy-denied") {
			t.Fatalf("denial without a specific reason for %s", raw)
		}
		if res.Allow {
			rs, err := explained.Eval(context.Background(), rego.EvalInput(input))
			if err != nil || len(rs) != 1 {
				t.Fatalf("explained: %v, %d results", err, len(rs))
			}
			if got := rs[0].Bindings["x"].([]any); len(got) != 0 {
				t.Fatalf("allowed, yet the policy finds reasons %v for %s", got, raw)
			}
		}
		if res.DenyReasons == nil || !slices.IsSorted(res.DenyReasons) {
			t.Fatalf("reasons %q not a sorted, non-nil list", res.DenyReasons)
		}
	})
}

// FuzzEvalInput builds typed inputs from fuzzed fields, which reach the
// policy's branches far more often than random JSON does. Eval on the typed
// input and EvalValue on its JSON form must agree, and the decision must be
// coherent as in FuzzEvalValue.
func FuzzEvalInput(f *testing.F) {
	addFieldSeeds(f)
	set := policytest.Default(f)
	f.Fuzz(func(t *testing.T, action, role, roles, userTenant, resourceTenant, tenant, plan string) {
		in := fieldsInput(action, role, roles, userTenant, resourceTenant, tenant, plan)
		typed, err := set.Eval(context.Background(), in)
		if err != nil {
			t.Fatalf("eval %+v: %v", in, err)
		}
		raw, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		viaJSON, err := set.EvalValue(context.Background(), json.RawMessage(raw))
		if err != nil {
			t.Fatalf("eval %s: %v", raw, err)
		}
		if typed.Allow != viaJSON.Allow || !slices.Equal(typed.DenyReasons, viaJSON.DenyReasons) {
			t.Fatalf("typed %+v, JSON %+v for %s", typed, viaJSON, raw)
		}
		if typed.Allow != (len(typed.DenyReasons) == 0) || slices.Contains(typed.DenyReasons, "policy-denied") {
			t.Fatalf("incoherent decision %+v for %s", typed, raw)
		}
	})
}

// addFieldSeeds seeds a fuzz target whose arguments are those of
// fieldsInput.
func addFieldSeeds(f *testing.F) {
	f.Add("orders:read", "viewer", "viewer", "acme", "acme", "acme", "team")
	f.Add("reports:export", "billing", "", "acme", "acme", "acme", "enterprise")
	f.Add("orders:delete", "", "admin", "acme", "globex", "acme", "free")
	f.Add("*:*", "admin", "admin,viewer", "", "", "", "")
	f.Add("webhooks:create", "editor", "editor", "acme", "acme", "acme", "platinum")
	f.Add("webhooks:create", "editor", "editor,", "acme", "acme", "acme", "platinum")
}

// fieldsInput is the typed input of fuzzed fields; roles is
// comma-separated, and "" leaves the roles out.
func fieldsInput(action, role, roles, userTenant, resourceTenant, tenant, plan string) policy.Input {
	in := policy.Input{
		Action:   action,
		User:     policy.User{ID: "u-1", Role: role, TenantID: userTenant},
		Resource: policy.Resource{ID: "r-1", Tenant: resourceTenant},
		Tenant:   policy.Tenant{ID: tenant, Plan: plan},
	}
	if roles != "" {
		in.User.Roles = strings.Split(roles, ",")
	}
	return in
}
