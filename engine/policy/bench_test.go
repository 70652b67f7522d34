package policy_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit/policytest"
)

// benchInput is a typical allowed request of an editor.
func benchInput() policy.Input {
	return policy.Input{
		Action: "orders:update",
		User: policy.User{
			ID:       "u-1001",
			Role:     "editor",
			Roles:    []string{"editor"},
			TenantID: "acme",
			Email:    "ed@acme.example",
			Claims:   map[string]any{"department": "sales", "mfa": true},
		},
		Resource: policy.Resource{Type: "orders", ID: "ord-1", Tenant: "acme"},
		Tenant:   policy.Tenant{ID: "acme", Plan: "team"},
	}
}

// BenchmarkEvaluate measures one decision of the default policy and
// reports its latency distribution: p50 and p99 over every operation.
func BenchmarkEvaluate(b *testing.B) {
	set := policytest.Default(b)
	in := benchInput()
	raw, err := json.Marshal(in)
	if err != nil {
		b.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		b.Fatal(err)
	}
	// A cancelable context, as a served request has.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	denied := in
	denied.Action = "orders:delete"
	denied.Resource.Tenant = "globex"
	cases := []struct {
		name  string
		allow bool
		eval  func() (policy.Result, error)
	}{
		{"typed", true, func() (policy.Result, error) { return set.Eval(ctx, in) }},
		// A denial also computes every reason: the slow path.
		{"typed-denied", false, func() (policy.Result, error) { return set.Eval(ctx, denied) }},
		{"map", true, func() (policy.Result, error) { return set.EvalValue(ctx, m) }},
		{"json-roundtrip", true, func() (policy.Result, error) {
			raw, err := json.Marshal(in)
			if err != nil {
				return policy.Result{}, err
			}
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return policy.Result{}, err
			}
			return set.EvalValue(ctx, v)
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for range 100 { // warm caches and the allocator
				if _, err := c.eval(); err != nil {
					b.Fatal(err)
				}
			}
			durs := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				res, err := c.eval()
				durs = append(durs, time.Since(start))
				if err != nil || res.Allow != c.allow {
					b.Fatalf("eval: allow=%v err=%v", res.Allow, err)
				}
			}
			b.StopTimer()
			reportPercentiles(b, durs)
		})
	}
}

// BenchmarkDecide measures Decide on the default policy: "hit" decides
// one input over and over, answered from the decision cache; "hit-5k"
// cycles through 5,000 inputs of distinct tenants, all of them held by
// the cache once decided (what a hit costs when the cache is large and
// out of the CPU's caches); "miss"
// decides inputs that differ in their tenant every time, more of them than
// the cache holds, so each one evaluates and is stored. Compare with
// BenchmarkEvaluate/typed.
func BenchmarkDecide(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	distinct := make([]policy.Input, 4*policy.DefaultDecisionCacheSize)
	for i := range distinct {
		in := benchInput()
		tenant := "t-" + strconv.Itoa(i)
		in.User.TenantID, in.Resource.Tenant, in.Tenant.ID = tenant, tenant, tenant
		distinct[i] = in
	}
	same := benchInput()
	const spread = 5000
	for _, c := range []struct {
		name  string
		input func(i int) policy.Input
		// warm is how many inputs miss before every decision hits; 0
		// means none ever hits.
		warm uint64
	}{
		{"hit", func(int) policy.Input { return same }, 1},
		{"hit-5k", func(i int) policy.Input { return distinct[i%spread] }, spread},
		{"miss", func(i int) policy.Input { return distinct[i%len(distinct)] }, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			set := policytest.Default(b)
			for i := range max(c.warm, 1) {
				if _, err := set.Decide(ctx, c.input(int(i))); err != nil {
					b.Fatal(err)
				}
			}
			durs := make([]time.Duration, 0, b.N)
			i := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				in := c.input(i)
				i++
				start := time.Now()
				res, err := set.Decide(ctx, in)
				durs = append(durs, time.Since(start))
				if err != nil || !res.Allow {
					b.Fatalf("decide: allow=%v err=%v", res.Allow, err)
				}
			}
			b.StopTimer()
			reportPercentiles(b, durs)
			// The warm-up decisions are the only misses of a hit case.
			hits, misses, _, _ := set.CacheStats()
			if c.warm > 0 && misses != c.warm || c.warm == 0 && hits != 0 {
				b.Fatalf("%d hits, %d misses", hits, misses)
			}
		})
	}
}

func reportPercentiles(b *testing.B, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	slices.Sort(durs)
	at := func(q float64) float64 {
		i := int(q * float64(len(durs)-1))
		return float64(durs[i].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// BenchmarkInputValue compares the two ways of turning a typed input into
// the AST the evaluator reads: built field by field, or through JSON.
func BenchmarkInputValue(b *testing.B) {
	in := benchInput()
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := in.Value(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			raw, err := json.Marshal(in)
			if err != nil {
				b.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				b.Fatal(err)
			}
			if _, err := ast.InterfaceToValue(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
