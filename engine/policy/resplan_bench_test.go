package policy_test

import (
	"strconv"
	"testing"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit/policytest"
	"github.com/svc-dev/svc/plan"
)

// BenchmarkPlanResources measures the resource plan of the default policy
// for an editor: "planned" is a full partial evaluation and translation
// (every caller a new user, so the plan cache never answers); "cached" a
// repeated caller. The bar is under 1 ms for a planned one.
func BenchmarkPlanResources(b *testing.B) {
	set := policytest.Default(b)
	in := benchInput()
	in.Resource = policy.Resource{Type: "orders"}
	b.Run("planned", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			in.User.ID = "u-" + strconv.Itoa(i)
			p, err := set.PlanResources(b.Context(), in)
			if err != nil || p.Kind != plan.Conditional {
				b.Fatalf("%+v, %v", p, err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		in.User.ID = "u-cached"
		for b.Loop() {
			if _, err := set.PlanResources(b.Context(), in); err != nil {
				b.Fatal(err)
			}
		}
	})
}
