package filter_test

import (
	"testing"

	"github.com/svc-dev/svc/authz/localapi/filter"
	wirefilter "github.com/svc-dev/svc/wire/filter"
)

// TestAliasesCompile: code written against the retired package still
// builds, and its values are the wire/filter package's.
func TestAliasesCompile(t *testing.T) {
	var (
		_ *wirefilter.Expr        = (*filter.Expr)(nil)
		_ wirefilter.Getter       = filter.Getter(nil)
		_ *wirefilter.SyntaxError = (*filter.SyntaxError)(nil)
	)
	e, err := filter.Parse("tenant=acme")
	if err != nil || filter.MaxLen != wirefilter.MaxLen {
		t.Fatalf("filter.Parse: %v", err)
	}
	if !e.Match(func(f string) (string, bool) { return "acme", f == "tenant" }) {
		t.Error("tenant=acme does not match a record of tenant acme")
	}
}
