package policy_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/reason"
)

func TestStoreEmpty(t *testing.T) {
	st := policy.NewStore(nil)
	if st.Load() != nil {
		t.Fatal("empty store has a set")
	}
	_, err := st.Eval(context.Background(), benchInput())
	if code := reason.Of(err, ""); code != reason.PolicyError {
		t.Fatalf("error = %v (code %q), want %q", err, code, reason.PolicyError)
	}
}

// TestStoreConcurrentSwap evaluates from many goroutines while another
// swaps between two sets that decide differently: every result must be
// exactly what one of the two sets decides, never a mix.
func TestStoreConcurrentSwap(t *testing.T) {
	allowAll, err := policy.FromModules(map[string]string{"a.rego": `package svc.authz

allow := true

deny_reasons := set()
`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	denyAll, err := policy.FromModules(map[string]string{"b.rego": `package svc.authz

default allow := false

deny_reasons contains "maintenance" if true

deny_reasons contains "read-only" if true
`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	allowAll, denyAll = allowAll.WithRevision("allow-all"), denyAll.WithRevision("deny-all")
	st := policy.NewStore(allowAll)

	const readers, evals = 8, 300
	var (
		wg       sync.WaitGroup
		done     = make(chan struct{})
		seen     [2]atomic.Int64
		failures atomic.Int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		sets := []*policy.Set{denyAll, allowAll}
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if old := st.Swap(sets[i%2]); old != sets[(i+1)%2] {
				t.Errorf("swap %d returned %q", i, old.Revision())
				return
			}
		}
	}()
	var readersWG sync.WaitGroup
	for range readers {
		readersWG.Add(1)
		go func() {
			defer readersWG.Done()
			for range evals {
				res, err := st.Eval(context.Background(), benchInput())
				switch {
				case err != nil:
					t.Error(err)
					failures.Add(1)
				case res.Revision == "allow-all" && res.Allow && len(res.DenyReasons) == 0:
					seen[0].Add(1)
				case res.Revision == "deny-all" && !res.Allow && slices.Equal(res.DenyReasons, []string{"maintenance", "read-only"}):
					seen[1].Add(1)
				default:
					t.Errorf("result matches neither set: %+v", res)
					failures.Add(1)
				}
			}
		}()
	}
	readersWG.Wait()
	close(done)
	wg.Wait()
	if failures.Load() > 0 {
		return
	}
	if seen[0].Load() == 0 || seen[1].Load() == 0 {
		t.Errorf("evaluations saw allow-all %d times and deny-all %d times; want both", seen[0].Load(), seen[1].Load())
	}
}
