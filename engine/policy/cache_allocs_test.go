package policy_test

import (
	"context"
	"testing"
	"unsafe"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/policytest"
)

// TestDecideHitAllocs guards the cost of a decision cache hit on the
// default policy: the decision id (one allocation), and nothing built
// from the input (its key parts are read from the typed input's strings,
// and hashed without moving the hasher to the heap).
func TestDecideHitAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	ctx := context.Background()
	set := policytest.Default(t)
	in := benchInput()
	if _, err := set.Decide(ctx, in); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if res, err := set.Decide(ctx, in); err != nil || !res.Allow {
			t.Fatalf("decide: allow=%v err=%v", res.Allow, err)
		}
	})
	if allocs > 2 {
		t.Errorf("Decide hit: %v allocations, want at most 2", allocs)
	}
	if hits, misses, _, _ := set.CacheStats(); misses != 1 || hits < 200 {
		t.Errorf("%d hits, %d misses: the decisions were not cache hits", hits, misses)
	}
}

// TestDecideCacheOwnsItsKey: a cached decision does not share memory with
// the input it was decided for. The ext_authz decoder hands out strings
// that share the request's buffer; were an entry to keep them, rewriting
// the buffer would rewrite the entry's key under the hash of the old one,
// and the entry would answer neither input rightly.
func TestDecideCacheOwnsItsKey(t *testing.T) {
	ctx := context.Background()
	set := policytest.Default(t)
	buf := []byte("acme")
	shared := unsafe.String(&buf[0], len(buf))
	in := benchInput()
	in.User.TenantID = shared
	if res, err := set.Decide(ctx, in); err != nil || !res.Allow {
		t.Fatalf("first decision: allow=%v err=%v", res.Allow, err)
	}
	copy(buf, "evil")
	// A user of another tenant, whom the policy denies.
	other := benchInput()
	other.User.TenantID = "evil"
	got, err := set.Decide(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	want, err := set.Eval(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if want.Allow || got.Allow != want.Allow {
		t.Fatalf("Decide allow=%v, Eval allow=%v", got.Allow, want.Allow)
	}
	orig := benchInput()
	if res, err := set.Decide(ctx, orig); err != nil || !res.Allow {
		t.Fatalf("original input: allow=%v err=%v", res.Allow, err)
	}
	if hits, _, _, _ := set.CacheStats(); hits != 1 {
		t.Errorf("%d cache hits, want 1 (the original input's)", hits)
	}
}
