package bundle_test

import (
	"bytes"
	"crypto/elliptic"
	"os"
	"path/filepath"
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

// TestWeReadOPASignedBundles verifies a bundle as `opa build
// --signing-key` signs it: its .signatures.json names OPA's "_default"
// plugin. It carries no created_at, which Info reports as zero.
func TestWeReadOPASignedBundles(t *testing.T) {
	key := ecKey(t, elliptic.P256())
	src, err := os.ReadFile(filepath.Join(defaultPolicyDir, "authz.rego"))
	if err != nil {
		t.Fatal(err)
	}
	b := opabundle.Bundle{
		Manifest: opabundle.Manifest{Revision: "opa-1", Roots: &[]string{"svc"}},
		Modules:  []opabundle.ModuleFile{{URL: "/authz.rego", Path: "/authz.rego", Raw: src}},
		Data:     map[string]any{},
	}
	if err := b.GenerateSignature(opabundle.NewSigningConfig(string(key.private), "ES256", ""), "default", false); err != nil {
		t.Fatal(err)
	}
	if b.Signatures.Plugin != "_default" {
		t.Fatalf("OPA's signer names plugin %q, not _default: the test proves nothing", b.Signatures.Plugin)
	}
	var buf bytes.Buffer
	if err := opabundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	info, err := bundle.Verify(bytes.NewReader(buf.Bytes()), key.public)
	if err != nil || !info.Verified || info.Revision != "opa-1" || !info.CreatedAt.IsZero() {
		t.Fatalf("Verify = %+v, %v; want verified opa-1 without created_at", info, err)
	}
	other := ecKey(t, elliptic.P256())
	if _, err := bundle.Verify(bytes.NewReader(buf.Bytes()), other.public); err == nil {
		t.Error("an OPA-signed bundle verifies under another key")
	}
}
