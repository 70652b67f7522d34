package reason_test

import (
	"errors"
	"testing"

	oldreason "github.com/svc-dev/svc/engine/reason"
	"github.com/svc-dev/svc/reason"
)

// TestAliasesAreTheLeafs: the retired package's names are the leaf
// package's, so code still importing it compiles and compares alike.
func TestAliasesAreTheLeafs(t *testing.T) {
	var c reason.Code = oldreason.TokenExpired
	if c != reason.TokenExpired || oldreason.PolicyBuiltinForbidden != reason.PolicyBuiltinForbidden {
		t.Fatalf("alias %q differs from the leaf code", c)
	}
	var e *reason.Error = oldreason.New(oldreason.PolicyDeny, "no")
	if !errors.Is(oldreason.Wrap(reason.PolicyDeny, e, "x"), &oldreason.Error{Code: reason.PolicyDeny}) {
		t.Fatal("errors.Is across the alias fails")
	}
	if got := oldreason.Of(e, reason.OK); got != reason.PolicyDeny {
		t.Fatalf("Of = %q", got)
	}
}
