package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const attrsPolicy = "../../examples/policies/resource-attributes"

// TestPolicyPlanResources: the plan of an owner is the condition the
// sidecar would answer, in the asked dialect and columns; a policy a plan
// cannot express exits 1 naming the rule's line; an input holding
// resource is refused.
func TestPolicyPlanResources(t *testing.T) {
	owner := `{"user":{"id":"u-1","roles":["member"],"tenant_id":"acme","claims":{}},"tenant":{"id":"acme","plan":"team"}}`
	r := run(t, "", "--output", "json", "policy", "plan-resources", attrsPolicy, "--action", "orders:update",
		"--dialect", "mysql", "--columns", "tenant=tenant_id", "--input", owner)
	var got planOutput
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if got.Kind != "conditional" || !strings.HasPrefix(got.SQL.Where, "(`tenant_id` = CAST(? AS BINARY) AND") || got.SQL.Params[0] != "acme" || got.Revision == "" {
		t.Errorf("plan = %+v", got)
	}
	r = run(t, "", "policy", "plan-resources", attrsPolicy, "--action", "orders:update", "--input", `{"user":{"tenant_id":"globex"},"tenant":{"id":"acme"}}`)
	if r.code != 0 || !strings.Contains(r.stdout, "kind: always_denied\nwhere: 1 = 0\n") {
		t.Errorf("another tenant: exit %d, %q", r.code, r.stdout)
	}
	r = run(t, "", "policy", "plan-resources", "../../authz/server/testdata/policy-plan-unsupported", "--action", "orders:read", "--input", `{"user":{"id":"a"}}`)
	if r.code != exitFailed || !strings.Contains(r.stderr, "plan-unsupported: rule allow at") || !strings.Contains(r.stderr, "policy.rego:6") {
		t.Errorf("unsupported: exit %d, %q", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"--action", "orders:read", "--input", `{"resource":{"id":"1"}}`},
		{"--input", owner},
		{"--action", "orders:read", "--dialect", "oracle"},
		{"--action", "orders:read", "--columns", "owner=x"},
	} {
		if r := run(t, "", append([]string{"policy", "plan-resources", attrsPolicy}, args...)...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, r.code, exitUsage)
		}
	}
}

// TestPolicyTestRunsPlanFixtures: core policy test runs the .plan.json
// fixtures beside the pairs and counts them.
func TestPolicyTestRunsPlanFixtures(t *testing.T) {
	r := run(t, "", "policy", "test", attrsPolicy)
	if r.code != 0 || !strings.Contains(r.stdout, "PASS owner-updates-own-open-orders (plan conditional, 8 rows)") {
		t.Errorf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}
