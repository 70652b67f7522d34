package bundle_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/svc-dev/svc/engine/bundle"
)

// A policy directory with a data file at its top level: the bundle claims
// the data's root beside svc.
func ExampleBuild() {
	var buf bytes.Buffer
	_, err := bundle.Build(&buf, "testdata/withdata", bundle.BuildOptions{
		Revision:  "2026.03.1",
		CreatedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	info, err := bundle.Inspect(&buf)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("revision:", info.Revision)
	fmt.Println("roots:", info.Roots)
	fmt.Println("policies:", info.Policies)
	fmt.Println("created:", info.CreatedAt.Format(time.RFC3339))
	fmt.Println("signed:", info.Signature != nil)
	// Output:
	// revision: 2026.03.1
	// roots: [svc tenants]
	// policies: [authz.rego svc/lib/helpers.rego]
	// created: 2026-03-01T12:00:00Z
	// signed: false
}
