package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/engine/reason"
	"github.com/svc-dev/svc/internal/testkit"
)

// TestDecideMemoMatchesEval decides varied inputs with DecideMemo, one
// memo per user value as the engine keeps one per verified token, on the
// default policy and on testdata/cache/nested (which read different parts
// of input.user: roles, role and tenant; claims) in random turns, as
// policy swaps would alternate them, and requires Eval's decision every
// time: from fixtures, with fields of the user and of the rest changed.
func TestDecideMemoMatchesEval(t *testing.T) {
	paths, err := filepath.Glob("../../policies/fixtures/*.input.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("fixtures: %v (%d found)", err, len(paths))
	}
	var base []policy.Input
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var in policy.Input
		if dec.Decode(&in) != nil {
			// Fixtures of malformed input; the changes below add fields.
			in = policy.Input{}
		}
		base = append(base, in)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	vals := []string{"", "editor", "admin,viewer", "acme", "globex", "orders:read", "3", "1.0", "x", "id", "ok", "team", "\xff"}
	inputs := slices.Clone(base)
	for range 300 {
		in := inputs[rng.IntN(len(inputs))]
		inputs = append(inputs, change(in, uint8(rng.IntN(16)), vals[rng.IntN(len(vals))]))
	}
	// Fewer memos than inputs: a memo serves several users in turn (and
	// inputs made by change from one another have equal users that are
	// not the same), as well as both sets.
	memos := make([]policy.UserMemo, 7)
	sets := []*policy.Set{mustDefault(t), mustNested(t)}
	ctx := context.Background()
	for range 3000 {
		i := rng.IntN(len(inputs))
		set := sets[rng.IntN(len(sets))]
		in := inputs[i]
		want, wantErr := set.Eval(ctx, in)
		got, err := set.DecideMemo(ctx, in, &memos[i%len(memos)])
		if (err == nil) != (wantErr == nil) || reason.Of(err, "") != reason.Of(wantErr, "") {
			t.Fatalf("decide error %v, eval error %v for %+v", err, wantErr, in)
		}
		if got.Allow != want.Allow || !slices.Equal(got.DenyReasons, want.DenyReasons) || got.Revision != want.Revision {
			t.Fatalf("decide %+v, eval %+v for %+v", got, want, in)
		}
	}
	for _, set := range sets {
		if hits, _, _, _ := set.CacheStats(); hits == 0 {
			t.Error("no decision was a cache hit: the memos were not compared")
		}
	}
}

// TestDecideMemoHitAllocs guards the cost of a cache hit through a memo:
// the decision id, and nothing built for the key.
func TestDecideMemoHitAllocs(t *testing.T) {
	if testkit.RaceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	ctx := context.Background()
	set := mustDefault(t)
	in := benchInput()
	var m policy.UserMemo
	if _, err := set.DecideMemo(ctx, in, &m); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if res, err := set.DecideMemo(ctx, in, &m); err != nil || !res.Allow {
			t.Fatalf("decide: allow=%v err=%v", res.Allow, err)
		}
	})
	if allocs > 1 {
		t.Errorf("DecideMemo hit: %v allocations, want at most 1", allocs)
	}
}

// TestDecideMemoConcurrent shares memos between goroutines that decide
// for two users in turn, on a policy whose key holds claim values built
// into the memo (testdata/cache/nested): every decision is Eval's, and
// the race detector sees the memo published and read.
func TestDecideMemoConcurrent(t *testing.T) {
	set := mustNested(t)
	users := []policy.User{
		{ID: "u-1", Claims: map[string]any{"level": json.Number("3"), "field": "id"}},
		{ID: "u-2", Claims: map[string]any{"level": 1, "field": "tenant"}},
	}
	in := policy.Input{
		Resource: policy.Resource{ID: "ok", Tenant: "ok"},
		Request:  &policy.Request{Method: "GET", Headers: map[string]string{"x-allow-a": "yes"}},
	}
	ctx := context.Background()
	want := make([]bool, len(users))
	for i, u := range users {
		in.User = u
		res, err := set.Eval(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = res.Allow
	}
	if want[0] == want[1] {
		t.Fatalf("both users decided %v: the test would not see a memo answer for the wrong user", want[0])
	}
	var memos [2]policy.UserMemo
	done := make(chan error, 4)
	for g := range 4 {
		go func() {
			for n := range 200 {
				i := (g + n) % len(users)
				x := in
				x.User = users[i]
				res, err := set.DecideMemo(ctx, x, &memos[n%2])
				if err == nil && res.Allow != want[i] {
					err = fmt.Errorf("user %d: allow=%v, want %v", i, res.Allow, want[i])
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
