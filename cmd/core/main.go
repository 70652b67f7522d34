// Command core tests, lints, benchmarks, bundles and measures the Rego
// policies of the svc authorization sidecar. The policy commands run the
// engine in-process; no sidecar is needed.
package main

import "os"

func main() {
	os.Exit(Execute(os.Args[1:], os.Stdout, os.Stderr))
}
