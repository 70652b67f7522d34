package policy_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/policytest"
)

// TestEvalAllocs guards the allocations of one evaluation of the default
// policy (BenchmarkEvaluate/typed and typed-denied): 100 and 250 when the
// bars were set, from 216 and 401 before the evaluation went through
// topdown directly with reused rule caches and constant tables; 94 and
// 245 since the input document's builder, terms and strings are kept in
// the evaluation state. The bars leave a little room; an old cost coming
// back fails. The bytes of an allowed evaluation are guarded too: a
// builder moved back to the heap is one allocation, but a kilobyte.
func TestEvalAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	set := policytest.Default(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	allowed := benchInput()
	denied := allowed
	denied.Action = "orders:delete"
	denied.Resource.Tenant = "globex"
	for _, tt := range []struct {
		name  string
		allow bool
		bar   float64
		in    func() (bool, error)
	}{
		{"allowed", true, 100, func() (bool, error) { r, err := set.Eval(ctx, allowed); return r.Allow, err }},
		{"denied", false, 260, func() (bool, error) { r, err := set.Eval(ctx, denied); return r.Allow, err }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			allow := !tt.allow
			n := testing.AllocsPerRun(200, func() { allow, err = tt.in() })
			if err != nil || allow != tt.allow {
				t.Fatalf("allow = %v, err = %v", allow, err)
			}
			if n > tt.bar {
				t.Errorf("%.1f allocations per evaluation, want at most %.0f", n, tt.bar)
			}
			t.Logf("%.1f allocations per evaluation", n)
		})
	}
	t.Run("allowed bytes", func(t *testing.T) {
		const runs, bar = 2000, 5500
		if _, err := set.Eval(ctx, allowed); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			if _, err := set.Eval(ctx, allowed); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		b := float64(after.TotalAlloc-before.TotalAlloc) / runs
		if b > bar {
			t.Errorf("%.0f bytes allocated per evaluation, want at most %d", b, bar)
		}
		t.Logf("%.0f bytes allocated per evaluation", b)
	})
}
