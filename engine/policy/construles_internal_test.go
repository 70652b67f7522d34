package policy

import (
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// TestConstantRules checks which rules a set takes as constant: only
// those whose value cannot depend on input, data, other rules or which
// body holds.
func TestConstantRules(t *testing.T) {
	set, err := FromModules(map[string]string{"p.rego": `package svc.authz

table := {"a": {"b": 1}}
list := [1, "x", {"y": null}]
with_true := 3 if { true }
default allow := false
depends_on_input := input.x
depends_on_rule := table.a
comprehension := [x | some x in [1, 2]]
conditional := 1 if input.x
else_value := 1 if { input.x } else := 2
several := 1
several := 1 if input.y
set_rule contains 1
f(x) := 1
obj.a := 1
obj.b := 2
nested.deep.value := 4
`, "q.rego": `package svc.authz.sub

other := "constant"
`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if cr := set.states.consts; cr != nil {
		for _, e := range cr.entries {
			got = append(got, e.ref.String()+" = "+e.value.String())
		}
	}
	slices.Sort(got)
	want := []string{
		`data.svc.authz.list = [1, "x", {"y": null}]`,
		`data.svc.authz.nested.deep.value = 4`,
		`data.svc.authz.obj.a = 1`,
		`data.svc.authz.obj.b = 2`,
		`data.svc.authz.sub.other = "constant"`,
		`data.svc.authz.table = {"a": {"b": 1}}`,
		`data.svc.authz.with_true = 3`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("constant rules:\n got %q\nwant %q", got, want)
	}
	// A rule cache with the constants finds them in its first frame only.
	c := newRuleCache()
	c.consts = set.states.consts
	ref := ast.MustParseRef("data.svc.authz.table")
	if v, _ := c.Get(ref); v == nil || !v.Equal(ast.MustParseTerm(`{"a": {"b": 1}}`)) {
		t.Errorf("Get(%v) = %v", ref, v)
	}
	c.Push()
	if v, undefined := c.Get(ref); v != nil || undefined {
		t.Errorf("in a pushed frame Get(%v) = %v, %v", ref, v, undefined)
	}
}
