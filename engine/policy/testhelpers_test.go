package policy_test

import (
	"testing"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/policies"
)

// mustDefault loads the default policy shipped in policies/.
func mustDefault(tb testing.TB) *policy.Set {
	tb.Helper()
	set, err := policy.LoadFS(policies.Default, ".")
	if err != nil {
		tb.Fatal(err)
	}
	return set
}
