// Package filter is the former home of the field filters of the live
// streams. Its names are aliases of package
// github.com/svc-dev/svc/wire/filter.
//
// Deprecated: use github.com/svc-dev/svc/wire/filter. This package will
// be removed in the next release.
package filter

import "github.com/svc-dev/svc/wire/filter"

// MaxLen bounds an expression.
const MaxLen = filter.MaxLen

// The filter types.
type (
	Expr        = filter.Expr
	Getter      = filter.Getter
	SyntaxError = filter.SyntaxError
)

// Parse is filter.Parse.
func Parse(s string) (*Expr, error) { return filter.Parse(s) }
