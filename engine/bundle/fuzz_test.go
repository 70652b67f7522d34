package bundle_test

import (
	"bytes"
	"crypto/elliptic"
	"testing"

	"github.com/svc-dev/svc/engine/bundle"
)

// FuzzInspect feeds arbitrary bytes to the bundle readers, seeded with
// built bundles (signed and unsigned) and damaged copies of them. Bundles
// come from the network and from users; no input may make a reader panic
// or accept an unsigned bundle under verification.
func FuzzInspect(f *testing.F) {
	key := ecKey(f, elliptic.P256())
	signed := build(f, defaultPolicyDir, bundle.BuildOptions{SignKeyPEM: key.private})
	unsigned := build(f, "testdata/withdata", bundle.BuildOptions{})
	f.Add(signed)
	f.Add(unsigned)
	f.Add(signed[:len(signed)/2])
	f.Add(rewrite(f, signed, replace("/authz.rego", func(b []byte) []byte { return append(b, "\n# edited\n"...) })))
	f.Add(pack(f, []entry{{"/.manifest", []byte(`{"revision":"x","roots":["svc"]}`)}, {"/.signatures.json", []byte(`{"signatures":["e30.e30.e30"]}`)}}))
	f.Fuzz(func(t *testing.T, raw []byte) {
		info, err := bundle.Inspect(bytes.NewReader(raw))
		if err == nil && info.Verified {
			t.Fatal("Inspect reports a bundle as verified")
		}
		vinfo, err := bundle.Verify(bytes.NewReader(raw), key.public)
		if err == nil && (vinfo.Signature == nil || !vinfo.Verified) {
			t.Fatalf("Verify accepted a bundle without a verified signature: %+v", vinfo)
		}
		if set, err := bundle.Load(bytes.NewReader(raw), &bundle.VerifyOptions{PublicKeyPEM: key.public}); err == nil && set == nil {
			t.Fatal("Load returned neither a set nor an error")
		}
	})
}
