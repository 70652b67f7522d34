// Package policytest compiles the default policy set for the tests of
// the packages that evaluate it.
package policytest

import (
	"testing"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/policies"
)

// Default is the default policy shipped in policies/ (policies.Default),
// compiled; a failure fails tb.
func Default(tb testing.TB) *policy.Set {
	tb.Helper()
	set, err := policy.LoadFS(policies.Default, ".")
	if err != nil {
		tb.Fatal(err)
	}
	return set
}
