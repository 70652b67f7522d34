// Package bundletest builds policy bundles in memory for tests: as
// `core policy bundle` builds them, and as `opa build --signing-key`
// does, with no created_at for the sidecar to order them by.
package bundletest

import (
	"bytes"
	"testing"

	opabundle "github.com/open-policy-agent/opa/v1/bundle"

	"github.com/svc-dev/svc/engine/bundle"
)

// Build bundles the policy directory dir with opts and returns the
// archive.
func Build(t testing.TB, dir string, opts bundle.BuildOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := bundle.Build(&buf, dir, opts); err != nil {
		t.Fatalf("build bundle of %s: %v", dir, err)
	}
	return buf.Bytes()
}

// OPABuild is a bundle of the one module authz.rego holding rego, signed
// with the ES256 key signKeyPEM as `opa build --signing-key` signs it: a
// revision, but no created_at in its manifest metadata.
func OPABuild(t testing.TB, revision string, rego, signKeyPEM []byte) []byte {
	t.Helper()
	b := opabundle.Bundle{
		Manifest: opabundle.Manifest{Revision: revision, Roots: &[]string{"svc"}},
		Modules:  []opabundle.ModuleFile{{URL: "/authz.rego", Path: "/authz.rego", Raw: rego}},
		Data:     map[string]any{},
	}
	if err := b.GenerateSignature(opabundle.NewSigningConfig(string(signKeyPEM), "ES256", ""), "default", false); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := opabundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
