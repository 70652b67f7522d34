package examples

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/svc-dev/svc/engine/fixture"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/plan"
)

// planPolicies are the policy directories whose plans are checked: the
// default policy and every example.
func planPolicies(t *testing.T) []string {
	t.Helper()
	dirs := []string{filepath.Join("..", "policies")}
	entries, err := os.ReadDir("policies")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join("policies", e.Name()))
		}
	}
	return dirs
}

// TestPlansAgreeWithDecisions: every plan fixture of a shipped policy
// passes, and for every shipped policy and every action its fixtures ask
// about, the resource plan permits exactly the rows the
// policy allows one by one — on the fixtures' own resources and on a
// random table of 1,000 rows built from the values the fixtures use
// (tenants, owners, statuses, departments), missing and null fields
// included.
func TestPlansAgreeWithDecisions(t *testing.T) {
	for _, dir := range planPolicies(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			set, err := policy.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			pairs, err := fixture.Discover(filepath.Join(dir, "fixtures"))
			if err != nil {
				t.Fatal(err)
			}
			plans, err := fixture.DiscoverPlans(filepath.Join(dir, "fixtures"))
			if err != nil {
				t.Fatal(err)
			}
			outcomes, err := fixture.RunPlans(context.Background(), set, plans)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range outcomes {
				if !o.Pass {
					t.Errorf("plan fixture %s: %s", o.Name, o.Detail())
				}
			}
			s := newSampler(pairs)
			rng := rand.New(rand.NewPCG(1, uint64(len(dir))))
			for _, action := range s.actions() {
				table := s.randomRows(rng, 1000)
				for i, in := range s.contexts(action) {
					// The whole table for the first caller, a part of
					// it for the others.
					n := 100
					if i == 0 {
						n = len(table)
					}
					rows := append(slices.Clone(s.rows), table[:n]...)
					p, bad, err := fixture.CheckPlan(context.Background(), set, in, action, s.types[action], rows)
					if err != nil {
						t.Fatalf("%s, context %d: %v", action, i, err)
					}
					for _, d := range bad[:min(len(bad), 3)] {
						row, _ := json.Marshal(d.Row)
						t.Errorf("%s as %v: plan %s: row %s allowed=%v in_plan=%v", action, in["user"], describe(p), row, d.Allowed, d.InPlan)
					}
				}
			}
		})
	}
}

func describe(p policy.ResourcePlan) string {
	if p.Kind == plan.Conditional {
		return p.Condition.String()
	}
	return string(p.Kind)
}

// sampler draws rows and contexts from what a policy's fixtures hold.
type sampler struct {
	// byAction maps an action to the inputs (without resource) asking it.
	byAction map[string][]map[string]any
	types    map[string]string
	rows     []plan.Row
	ids      []string
	tenants  []string
	attrs    map[string][]any
}

func newSampler(pairs []fixture.Pair) *sampler {
	s := &sampler{byAction: map[string][]map[string]any{}, types: map[string]string{}, attrs: map[string][]any{}}
	seen := map[string]bool{}
	add := func(list *[]string, v string) {
		if !slices.Contains(*list, v) {
			*list = append(*list, v)
		}
	}
	for _, p := range pairs {
		in, ok := p.Input.(map[string]any)
		if !ok {
			continue
		}
		action, _ := in["action"].(string)
		res, _ := in["resource"].(map[string]any)
		ctx := maps.Clone(in)
		delete(ctx, "resource")
		delete(ctx, "action")
		key, _ := json.Marshal(ctx)
		if !seen[action+string(key)] {
			seen[action+string(key)] = true
			s.byAction[action] = append(s.byAction[action], ctx)
		}
		if typ, _ := res["type"].(string); typ != "" {
			s.types[action] = typ
		}
		row := plan.Row{}
		row.ID, _ = res["id"].(string)
		row.Tenant, _ = res["tenant"].(string)
		row.Attributes, _ = res["attributes"].(map[string]any)
		s.rows = append(s.rows, row)
		add(&s.ids, row.ID)
		add(&s.tenants, row.Tenant)
		for k, v := range row.Attributes {
			s.attrs[k] = append(s.attrs[k], v)
		}
		if u, ok := in["user"].(map[string]any); ok {
			if id, _ := u["id"].(string); id != "" {
				// Owners are users.
				s.attrs["owner"] = append(s.attrs["owner"], id)
			}
			if tenant, _ := u["tenant_id"].(string); tenant != "" {
				add(&s.tenants, tenant)
			}
		}
	}
	add(&s.tenants, "other-tenant")
	add(&s.ids, "other-id")
	return s
}

func (s *sampler) actions() []string { return slices.Sorted(maps.Keys(s.byAction)) }

// contexts are up to three inputs asking action, spread over the list.
func (s *sampler) contexts(action string) []map[string]any {
	all := s.byAction[action]
	if len(all) <= 3 {
		return all
	}
	out := make([]map[string]any, 0, 3)
	for i := range 3 {
		out = append(out, all[i*len(all)/3])
	}
	return out
}

// randomRows draws n rows: each field from the values seen, sometimes
// missing, null or a value no fixture uses.
func (s *sampler) randomRows(rng *rand.Rand, n int) []plan.Row {
	keys := slices.Sorted(maps.Keys(s.attrs))
	rows := make([]plan.Row, n)
	for i := range rows {
		r := plan.Row{ID: pick(rng, s.ids), Tenant: pick(rng, s.tenants)}
		for _, k := range keys {
			switch x := rng.IntN(10); {
			case x == 0:
				continue // missing
			case x == 1:
				setAttr(&r, k, nil)
			case x == 2:
				setAttr(&r, k, fmt.Sprintf("unseen-%d", rng.IntN(3)))
			default:
				setAttr(&r, k, s.attrs[k][rng.IntN(len(s.attrs[k]))])
			}
		}
		rows[i] = r
	}
	return rows
}

func pick(rng *rand.Rand, from []string) string { return from[rng.IntN(len(from))] }

func setAttr(r *plan.Row, k string, v any) {
	if r.Attributes == nil {
		r.Attributes = map[string]any{}
	}
	r.Attributes[k] = v
}
