package policy_test

import (
	"regexp"
	"sync"
	"testing"

	"github.com/svc-dev/svc/engine/policy"
)

// TestNewDecisionIDUnique: ids drawn concurrently are UUID version 4 text
// and never repeat.
func TestNewDecisionIDUnique(t *testing.T) {
	uuid4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	const workers, per = 4, 5000
	ids := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range per {
				ids[w] = append(ids[w], policy.NewDecisionID())
			}
		})
	}
	wg.Wait()
	seen := make(map[string]bool, workers*per)
	for _, list := range ids {
		for _, id := range list {
			if !uuid4.MatchString(id) {
				t.Fatalf("id %q is not UUID version 4 text", id)
			}
			if seen[id] {
				t.Fatalf("id %q drawn twice", id)
			}
			seen[id] = true
		}
	}
}
