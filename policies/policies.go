// Package policies ships the default authorization policy (package
// svc.authz, authz.rego) and its fixtures. The sidecar runs Default when
// no policy directory or bundle is configured, and `core policy test
// policies/ --fixtures policies/fixtures` checks every fixture pair
// (<name>.input.json and <name>.expect.json) against it.
//
// A policy directory is loaded recursively, so everything under this one
// that ends in .rego is part of the default set; for that reason the
// example policies to start from live in examples/policies/, not here.
package policies

import "embed"

// Default holds the default policy set at its root, ready for
// policy.LoadFS(policies.Default, ".").
//
//go:embed *.rego
var Default embed.FS
