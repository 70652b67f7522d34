package bundle_test

import (
	"bytes"
	"crypto/elliptic"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	opabundle "github.com/open-policy-agent/opa/v1/bundle"

	"github.com/svc-dev/svc/engine/bundle"
)

// TestOPAReadsOurBundles reads a built bundle with OPA's reader configured
// as an OPA agent would be (keys looked up by the kid of the signature),
// so that bundles built here also serve plain OPA.
func TestOPAReadsOurBundles(t *testing.T) {
	key := ecKey(t, elliptic.P256())
	raw := build(t, defaultPolicyDir, bundle.BuildOptions{SignKeyPEM: key.private, KeyID: "ops", Revision: "v7"})
	vc := opabundle.NewVerificationConfig(map[string]*opabundle.KeyConfig{
		"ops": {Key: string(key.public), Algorithm: "ES256"},
	}, "", "", nil)
	b, err := opabundle.NewReader(bytes.NewReader(raw)).WithBundleVerificationConfig(vc).WithRegoVersion(ast.RegoV1).Read()
	if err != nil {
		t.Fatalf("OPA's reader rejects the bundle: %v", err)
	}
	if b.Manifest.Revision != "v7" || len(b.Modules) != 1 || (*b.Manifest.Roots)[0] != "svc" {
		t.Errorf("OPA read revision %q, %d modules, roots %v", b.Manifest.Revision, len(b.Modules), *b.Manifest.Roots)
	}
	if created, ok := b.Manifest.Metadata["created_at"].(string); !ok || created != "2026-03-01T12:00:00Z" {
		t.Errorf("manifest metadata %v, want created_at", b.Manifest.Metadata)
	}

	// And OPA refuses it under another key, as we do.
	other := ecKey(t, elliptic.P256())
	vc = opabundle.NewVerificationConfig(map[string]*opabundle.KeyConfig{
		"ops": {Key: string(other.public), Algorithm: "ES256"},
	}, "", "", nil)
	if _, err := opabundle.NewReader(bytes.NewReader(raw)).WithBundleVerificationConfig(vc).Read(); err == nil {
		t.Error("OPA's reader accepts the bundle under another key")
	}
}
