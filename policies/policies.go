// Package policies ships the default authorization policy (package
// svc.authz) and its fixtures. The sidecar runs Default when no policy
// directory or bundle is configured; `core policy test policies/` runs the
// fixtures in policies/fixtures against it.
package policies

import "embed"

// Default holds the default policy set at its root, ready for
// policy.LoadFS(policies.Default, ".").
//
//go:embed *.rego
var Default embed.FS
