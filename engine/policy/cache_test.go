package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/policytest"
	"github.com/svc-dev/svc/reason"
)

// fixtureInputs reads the inputs of the default policy's fixtures that fit
// the typed Input; a few hold deliberately ill-typed fields.
func fixtureInputs(t testing.TB) map[string]policy.Input {
	t.Helper()
	files := testkit.ReadGlob(t, "../../policies/fixtures/*.input.json")
	out := make(map[string]policy.Input, len(files))
	for _, file := range files {
		var in policy.Input
		if json.Unmarshal(file.Data, &in) != nil {
			continue
		}
		out[strings.TrimSuffix(filepath.Base(file.Path), ".input.json")] = in
	}
	if len(out) < len(files)/2 {
		t.Fatalf("only %d of %d fixtures fit the typed input", len(out), len(files))
	}
	return out
}

// stats is a snapshot of Set.CacheStats.
type stats struct {
	hits, misses uint64
	entries      int
}

func statsOf(set *policy.Set) stats {
	h, m, n, _ := set.CacheStats()
	return stats{h, m, n}
}

// evalWhole evaluates the policy on the whole input document, as a
// reference for Decide and Eval, which give the policy only the parts it
// reads.
func evalWhole(ctx context.Context, set *policy.Set, in policy.Input) (policy.Result, error) {
	v, err := in.Value()
	if err != nil {
		return set.Eval(ctx, in)
	}
	return set.EvalValue(ctx, v)
}

// decideLikeEval decides in with Decide, with Eval and on the whole input
// document, and fails unless all give the same decision; it returns
// Decide's result.
func decideLikeEval(t testing.TB, set *policy.Set, in policy.Input) policy.Result {
	t.Helper()
	ctx := context.Background()
	want, err := evalWhole(ctx, set, in)
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	pruned, err := set.Eval(ctx, in)
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	if pruned.Allow != want.Allow || !slices.Equal(pruned.DenyReasons, want.DenyReasons) || pruned.Revision != want.Revision {
		t.Fatalf("eval = %+v, whole-input evaluation = %+v for %+v", pruned, want, in)
	}
	got, err := set.Decide(ctx, in)
	if err != nil {
		t.Fatalf("decide: %v", err)
	}
	if got.Allow != want.Allow || !slices.Equal(got.DenyReasons, want.DenyReasons) || got.Revision != want.Revision {
		t.Fatalf("decide = %+v, whole-input evaluation = %+v for %+v", got, want, in)
	}
	if got.DenyReasons == nil {
		t.Fatalf("decide returned nil reasons for %+v", in)
	}
	return got
}

// TestDecideFixtures decides every fixture input of the default policy
// twice: the second time from the cache (the first may be too, when an
// earlier fixture had the same key), with a fresh decision id, and both
// times exactly as evaluation decides.
func TestDecideFixtures(t *testing.T) {
	set := policytest.Default(t)
	inputs := fixtureInputs(t)
	ids := map[string]bool{}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			first := decideLikeEval(t, set, in)
			before := statsOf(set)
			second := decideLikeEval(t, set, in)
			after := statsOf(set)
			if after.hits != before.hits+1 {
				t.Errorf("second decision was not a hit: %+v → %+v", before, after)
			}
			for _, id := range []string{first.DecisionID, second.DecisionID} {
				if len(id) != 36 || ids[id] {
					t.Errorf("decision id %q is malformed or reused", id)
				}
				ids[id] = true
			}
		})
	}
	// Two fixtures can share a key; the cache holds one entry per key.
	if s := statsOf(set); s.entries == 0 || s.entries > len(inputs) {
		t.Errorf("entries = %d after %d fixtures", s.entries, len(inputs))
	}
}

// TestDecideKeyChanges changes one field of a decided input at a time: a
// field the default policy reads must miss the cache, any other must hit,
// and either way the decision is evaluation's.
func TestDecideKeyChanges(t *testing.T) {
	base := benchInput()
	base.Request = &policy.Request{Method: "GET", Path: "/api/orders/1", Headers: map[string]string{"x-request-id": "r-1"}}
	tests := []struct {
		name   string
		change func(*policy.Input)
		hit    bool
	}{
		{"role", func(in *policy.Input) { in.User.Role = "viewer" }, false},
		{"roles", func(in *policy.Input) { in.User.Roles = []string{"editor", "billing"} }, false},
		{"roles nil", func(in *policy.Input) { in.User.Roles = nil }, false},
		{"user tenant", func(in *policy.Input) { in.User.TenantID = "globex" }, false},
		{"resource tenant", func(in *policy.Input) { in.Resource.Tenant = "globex" }, false},
		{"deployment tenant", func(in *policy.Input) { in.Tenant.ID = "globex" }, false},
		{"action", func(in *policy.Input) { in.Action = "orders:read" }, false},
		{"plan", func(in *policy.Input) { in.Tenant.Plan = "free" }, false},
		{"request id header", func(in *policy.Input) { in.Request.Headers["x-request-id"] = "r-2" }, true},
		{"new header", func(in *policy.Input) { in.Request.Headers["accept"] = "text/html" }, true},
		{"no request", func(in *policy.Input) { in.Request = nil }, true},
		{"path", func(in *policy.Input) { in.Request.Path = "/api/orders/2" }, true},
		{"user id", func(in *policy.Input) { in.User.ID = "u-2" }, true},
		{"email", func(in *policy.Input) { in.User.Email = "" }, true},
		{"claims", func(in *policy.Input) { in.User.Claims = map[string]any{"department": "it"} }, true},
		{"resource id", func(in *policy.Input) { in.Resource.ID = "ord-2" }, true},
		{"resource type", func(in *policy.Input) { in.Resource.Type = "" }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := policytest.Default(t)
			decideLikeEval(t, set, base)
			in := base
			in.User.Roles = slices.Clone(base.User.Roles)
			req := *base.Request
			req.Headers = map[string]string{"x-request-id": "r-1"}
			in.Request = &req
			tt.change(&in)
			decideHit(t, set, in, tt.hit)
		})
	}
}

// decideHit decides in on set as Eval would and fails t unless the
// decision cache answered it exactly when hit says so.
func decideHit(t *testing.T, set *policy.Set, in policy.Input, hit bool) {
	t.Helper()
	before := statsOf(set)
	decideLikeEval(t, set, in)
	after := statsOf(set)
	if got := after.hits == before.hits+1; got != hit {
		t.Fatalf("hit = %v, want %v (%+v → %+v)", got, hit, before, after)
	}
}

// TestDecideVariableKey uses a policy that finds a header with a variable
// key: every header is part of the key, other request fields are not
// unless the policy reads them.
func TestDecideVariableKey(t *testing.T) {
	base := policy.Input{
		Action:   "orders:read",
		User:     policy.User{ID: "u-1", Claims: map[string]any{"level": json.Number("3"), "field": "state"}},
		Resource: policy.Resource{ID: "ok", Tenant: "acme"},
		Request:  &policy.Request{Method: "GET", Path: "/", Headers: map[string]string{"x-allow-orders": "yes"}},
	}
	tests := []struct {
		name   string
		change func(*policy.Input)
		hit    bool
	}{
		{"any header", func(in *policy.Input) { in.Request.Headers["x-request-id"] = "r-2" }, false},
		{"allowing header", func(in *policy.Input) { in.Request.Headers["x-allow-orders"] = "no" }, false},
		{"method", func(in *policy.Input) { in.Request.Method = "POST" }, false},
		{"level", func(in *policy.Input) { in.User.Claims["level"] = json.Number("1") }, false},
		{"level written otherwise", func(in *policy.Input) { in.User.Claims["level"] = json.Number("3.0") }, false},
		{"field", func(in *policy.Input) { in.User.Claims["field"] = "id" }, false},
		{"resource", func(in *policy.Input) { in.Resource.ID = "other" }, false},
		{"path", func(in *policy.Input) { in.Request.Path = "/other" }, true},
		{"other claim", func(in *policy.Input) { in.User.Claims["team"] = "a" }, true},
		{"action", func(in *policy.Input) { in.Action = "orders:write" }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := mustNested(t)
			decideLikeEval(t, set, base)
			in := base
			in.User.Claims = map[string]any{"level": json.Number("3"), "field": "state"}
			req := *base.Request
			req.Headers = map[string]string{"x-allow-orders": "yes"}
			in.Request = &req
			tt.change(&in)
			decideHit(t, set, in, tt.hit)
		})
	}
}

// TestDecideDistinctValues decides inputs whose key values look alike
// (absent, null, empty, false, 1 and 1.0) in order, then again: each must
// be a key of its own, so the second round hits every time and every
// decision is the one evaluation gives.
func TestDecideDistinctValues(t *testing.T) {
	set := mustModule(t, `default allow := false

default state := "absent"

state := json.marshal(input.user.claims.flag)

deny_reasons contains state`)
	if keys, _ := set.CacheKeys(); !slices.Equal(keys, []string{"input.user.claims.flag"}) {
		t.Fatalf("keys = %q", keys)
	}
	tests := []struct {
		name   string
		claims map[string]any
		want   string
	}{
		{"absent", map[string]any{}, "absent"},
		{"claims null", nil, "absent"},
		{"null", map[string]any{"flag": nil}, "null"},
		{"empty string", map[string]any{"flag": ""}, `""`},
		{"false", map[string]any{"flag": false}, "false"},
		{"one", map[string]any{"flag": json.Number("1")}, "1"},
		{"one point zero", map[string]any{"flag": json.Number("1.0")}, "1.0"},
		{"empty object", map[string]any{"flag": map[string]any{}}, "{}"},
		{"empty array", map[string]any{"flag": []any{}}, "[]"},
	}
	for round := range 2 {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%d", tt.name, round), func(t *testing.T) {
				in := policy.Input{User: policy.User{Claims: tt.claims}}
				before := statsOf(set)
				res := decideLikeEval(t, set, in)
				if !slices.Equal(res.DenyReasons, []string{tt.want}) {
					t.Fatalf("reasons = %q, want %q", res.DenyReasons, tt.want)
				}
				if hit := statsOf(set).hits == before.hits+1; hit != (round == 1) {
					t.Fatalf("round %d: hit = %v", round, hit)
				}
			})
		}
	}
	if s := statsOf(set); s.entries != len(tests) {
		t.Fatalf("entries = %d, want %d", s.entries, len(tests))
	}
}

// TestDecideResourceAttributes decides inputs that differ only in a
// resource attribute: each is a key of its own, so a decision cached for
// the owner never answers another user or another status.
func TestDecideResourceAttributes(t *testing.T) {
	set := mustModule(t, `default allow := false

allow if {
	input.resource.attributes.owner == input.user.id
	input.resource.attributes.status != "archived"
}

deny_reasons contains "not-owner" if input.resource.attributes.owner != input.user.id`)
	owned := func(owner, status string) policy.Input {
		return policy.Input{
			Action:   "orders:update",
			User:     policy.User{ID: "u-1"},
			Resource: policy.Resource{Type: "orders", ID: "ord-1", Tenant: "acme", Attributes: map[string]any{"owner": owner, "status": status}},
		}
	}
	tests := []struct {
		name  string
		in    policy.Input
		allow bool
	}{
		{"owner", owned("u-1", "open"), true},
		{"other owner", owned("u-2", "open"), false},
		{"archived", owned("u-1", "archived"), false},
		{"no attributes", policy.Input{Action: "orders:update", User: policy.User{ID: "u-1"}}, false},
		{"owner again", owned("u-1", "open"), true},
		{"other owner again", owned("u-2", "open"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if res := decideLikeEval(t, set, tt.in); res.Allow != tt.allow {
				t.Fatalf("allow = %v, want %v", res.Allow, tt.allow)
			}
		})
	}
	if s := statsOf(set); s.entries != 4 {
		t.Fatalf("entries = %d, want 4", s.entries)
	}
	// A policy that reads the whole resource keys on the attributes too.
	whole := mustModule(t, `default allow := false

allow if input.resource == {"id": "ord-1", "tenant": "acme", "attributes": {"owner": "u-1"}}`)
	in := owned("u-1", "open")
	in.Resource.Type = ""
	delete(in.Resource.Attributes, "status")
	if !decideLikeEval(t, whole, in).Allow {
		t.Fatal("denied the owner")
	}
	in.Resource.Attributes = map[string]any{"owner": "u-2"}
	if decideLikeEval(t, whole, in).Allow {
		t.Fatal("allowed another owner")
	}
}

// TestDecideResultIsOwn checks what a hit hands out: reasons the caller
// may change without changing later decisions, the revision of the set
// asked (a copy made by WithRevision shares the cache) and errors exactly
// as evaluation gives them.
func TestDecideResultIsOwn(t *testing.T) {
	set := policytest.Default(t)
	in := benchInput()
	in.Action = "orders:delete"
	first := decideLikeEval(t, set, in)
	want := slices.Clone(first.DenyReasons)
	first.DenyReasons[0] = "changed"
	if got := decideLikeEval(t, set, in); !slices.Equal(got.DenyReasons, want) {
		t.Fatalf("reasons = %q after the caller changed a result, want %q", got.DenyReasons, want)
	}

	renamed := set.WithRevision("bundle-7")
	before := statsOf(set)
	res, err := renamed.Decide(context.Background(), in)
	if err != nil || res.Revision != "bundle-7" || statsOf(set).hits != before.hits+1 {
		t.Fatalf("copy decided %+v, %v (hits %d → %d)", res, err, before.hits, statsOf(set).hits)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, evalErr := set.Eval(ctx, in)
	_, err = set.Decide(ctx, in)
	if evalErr == nil || err == nil || reason.Of(err, "") != reason.Of(evalErr, "") {
		t.Fatalf("canceled: decide error %v, eval error %v", err, evalErr)
	}
}

func TestDecideErrorsNotCached(t *testing.T) {
	set := mustModule(t, `allow := input.user.role`)
	in := benchInput()
	for range 2 {
		_, err := set.Decide(context.Background(), in)
		if code := reason.Of(err, ""); code != reason.PolicyError {
			t.Fatalf("error = %v (code %q), want %q", err, code, reason.PolicyError)
		}
	}
	if s := statsOf(set); s != (stats{misses: 2}) {
		t.Fatalf("stats = %+v, want two misses and no entry", s)
	}
	_, err := set.Decide(context.Background(), policy.Input{User: policy.User{Claims: map[string]any{"c": make(chan int)}}})
	if code := reason.Of(err, ""); code != reason.InputInvalid {
		t.Fatalf("error = %v (code %q), want %q", err, code, reason.InputInvalid)
	}
	_, err = policy.NewStore(nil).Decide(context.Background(), in)
	if code := reason.Of(err, ""); code != reason.PolicyError {
		t.Fatalf("empty store: error = %v (code %q), want %q", err, code, reason.PolicyError)
	}
}

// TestDecideInvalidInputAfterHit decides an input, then inputs that agree
// with it on every key path but whose claims (which the policy never
// reads) cannot be converted: evaluation rejects them, so Decide must too
// rather than answer from the cache.
func TestDecideInvalidInputAfterHit(t *testing.T) {
	set := mustModule(t, "allow if input.user.role == \"editor\"\n\ndeny_reasons := set()")
	decideLikeEval(t, set, benchInput())
	tests := []struct {
		name   string
		claims map[string]any
	}{
		{"channel", map[string]any{"c": make(chan int)}},
		{"nested function", map[string]any{"a": []any{map[string]any{"f": func() {}}}}},
		{"malformed number", map[string]any{"n": json.Number("1e")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := benchInput()
			in.User.Claims = tt.claims
			_, evalErr := set.Eval(context.Background(), in)
			_, err := set.Decide(context.Background(), in)
			if code := reason.Of(err, ""); code != reason.InputInvalid || reason.Of(evalErr, "") != code {
				t.Fatalf("decide error %v, eval error %v; want both %q", err, evalErr, reason.InputInvalid)
			}
		})
	}
	in := benchInput()
	in.User.Claims = map[string]any{"n": json.Number("12"), "ok": []any{1.5, nil, map[string]any{}}}
	before := statsOf(set)
	decideLikeEval(t, set, in)
	if statsOf(set).hits != before.hits+1 {
		t.Fatal("convertible claims the policy does not read must still hit")
	}
}

// TestDecideLargeKeyNotCached keys the nested policy on a header map too
// large to keep: such inputs are decided, never stored.
func TestDecideLargeKeyNotCached(t *testing.T) {
	set := mustNested(t)
	in := policy.Input{Request: &policy.Request{Method: "GET", Headers: map[string]string{"x-big": strings.Repeat("a", 4096)}}}
	for range 2 {
		decideLikeEval(t, set, in)
	}
	if s := statsOf(set); s != (stats{misses: 2}) {
		t.Fatalf("stats = %+v, want two misses and no entry", s)
	}
}

// TestDecideBounded decides more distinct inputs than the cache holds: it
// stays at its bound (DecisionCacheSize's, else the default), and
// decisions that were evicted or kept are still evaluation's. A bound of
// 0 turns the cache off.
func TestDecideBounded(t *testing.T) {
	const module = "allow if startswith(input.action, \"a\")\n\ndeny_reasons := set()"
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		opts  []policy.Option
		bound int
	}{
		{"default", nil, policy.DefaultDecisionCacheSize},
		{"set", []policy.Option{policy.DecisionCacheSize(1600)}, 1600},
		{"off", []policy.Option{policy.DecisionCacheSize(0)}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if testkit.RaceEnabled && tt.bound > 10000 {
				t.Skip("tens of thousands of evaluations: too slow under the race detector")
			}
			set := mustModule(t, module, tt.opts...)
			// Enough inputs that every shard, which keys reach by their
			// random hash, surely fills.
			n := tt.bound*3/2 + 2000
			for i := range n {
				if _, err := set.Decide(ctx, policy.Input{Action: fmt.Sprintf("a%d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			hits, misses, entries, enabled := set.CacheStats()
			if enabled != (tt.bound > 0) || entries != tt.bound || hits != 0 || tt.bound > 0 && misses != uint64(n) {
				t.Fatalf("cache enabled %v, %d entries, %d hits, %d misses after %d distinct inputs, want %d entries", enabled, entries, hits, misses, n, tt.bound)
			}
			for _, i := range []int{0, 1, n / 2, n - 2, n - 1} {
				decideLikeEval(t, set, policy.Input{Action: fmt.Sprintf("a%d", i)})
				decideLikeEval(t, set, policy.Input{Action: fmt.Sprintf("b%d", i)})
			}
			if s := statsOf(set); s.entries != tt.bound {
				t.Fatalf("entries = %d, want %d", s.entries, tt.bound)
			}
		})
	}
}

// TestDecideConcurrentSwap decides from many goroutines, through the
// store, while another goroutine swaps between two cacheable sets that
// decide differently: every result must be exactly what the set named by
// its revision evaluates for that input.
func TestDecideConcurrentSwap(t *testing.T) {
	sets := []*policy.Set{policytest.Default(t).WithRevision("default"), mustNested(t).WithRevision("nested")}
	inputs := slices.Collect(maps.Values(fixtureInputs(t)))
	type decision struct {
		allow   bool
		reasons string
	}
	want := map[string][]decision{}
	for _, set := range sets {
		for _, in := range inputs {
			res, err := set.Eval(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			want[set.Revision()] = append(want[set.Revision()], decision{res.Allow, strings.Join(res.DenyReasons, "\n")})
		}
	}
	st := policy.NewStore(sets[0])
	const readers, decisions = 8, 400
	done := make(chan struct{})
	var swapper sync.WaitGroup
	swapper.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			st.Swap(sets[i%2])
		}
	})
	var wg sync.WaitGroup
	var seen [2]atomic.Int64
	// Each reader makes at least `decisions` decisions, and goes on until
	// both sets have decided from their caches: on a loaded machine the
	// swapper may run seldom, and the test must still exercise both.
	covered := func() bool {
		for i, set := range sets {
			if hits, _, _, _ := set.CacheStats(); seen[i].Load() == 0 || hits == 0 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(time.Minute)
	for r := range readers {
		wg.Go(func() {
			for i := 0; i < decisions || (!covered() && time.Now().Before(deadline)); i++ {
				k := (r + i) % len(inputs)
				res, err := st.Decide(context.Background(), inputs[k])
				if err != nil {
					t.Error(err)
					return
				}
				exp, ok := want[res.Revision]
				if !ok || exp[k] != (decision{res.Allow, strings.Join(res.DenyReasons, "\n")}) {
					t.Errorf("input %d: decided %+v, which set %q does not", k, res, res.Revision)
					return
				}
				if res.Revision == "default" {
					seen[0].Add(1)
				} else {
					seen[1].Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(done)
	swapper.Wait()
	for i, set := range sets {
		hits, _, _, _ := set.CacheStats()
		if seen[i].Load() == 0 || hits == 0 {
			t.Errorf("set %q decided %d times, %d from its cache; want both", set.Revision(), seen[i].Load(), hits)
		}
	}
}

// TestDecideHeapFlatOnceFull decides distinct inputs far beyond the cache's
// bound: once full, the cache's memory stays what it was, however many
// decisions it evicts and replaces.
func TestDecideHeapFlatOnceFull(t *testing.T) {
	if testkit.RaceEnabled {
		t.Skip("a quarter of a million evaluations: too slow under the race detector")
	}
	set := mustModule(t, "allow if startswith(input.action, \"a\")\n\ndeny_reasons := set()")
	ctx := context.Background()
	next := 0
	testkit.HeapFlatOnceFull(t, policy.DefaultDecisionCacheSize, func(n int) {
		for range n {
			if _, err := set.Decide(ctx, policy.Input{Action: "a" + strconv.Itoa(next)}); err != nil {
				t.Fatal(err)
			}
			next++
		}
	})
}
