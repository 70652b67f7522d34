package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	opabundle "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/util"
)

// FuzzCompactJSON builds compact data from JSON text as a bundle's data
// file is read and compares it with OPA's decoding: the same document,
// and for valid JSON the digest OPA's signer computes.
func FuzzCompactJSON(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,2.50,{"c":null}],"d":"\u00e9<>"},"e":false,"a":{"x":1e3}}`))
	f.Add([]byte(diffData(3)))
	f.Add([]byte(`{"big":{` + string(bytes.Repeat([]byte(`"k":"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv",`), 40)) + `"z":0}}`))
	f.Add([]byte(`{"a":1} trailing`))
	f.Add([]byte(`[1]`))
	hasher, err := opabundle.NewSignatureHasher(opabundle.SHA256)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var doc any
		derr := util.UnmarshalJSON(raw, &doc)
		_, isObj := doc.(map[string]any)
		var b CompactDataBuilder
		digest := sha256.New()
		berr := b.AddJSON(nil, bytes.NewReader(raw), digest)
		if derr != nil || !isObj {
			if berr == nil {
				t.Fatalf("AddJSON accepted %q, which OPA's decoding refuses or is not an object (%v)", raw, derr)
			}
			return
		}
		if berr != nil {
			t.Fatalf("AddJSON(%q): %v; OPA decodes it", raw, berr)
		}
		got, err := b.Build().root.value()
		if err != nil {
			t.Fatal(err)
		}
		want, err := ast.InterfaceToValue(doc)
		if err != nil {
			t.Fatal(err)
		}
		if got.Compare(want) != 0 {
			t.Fatalf("compact %v, OPA %v", got, want)
		}
		if json.Valid(raw) {
			sum, err := hasher.HashFile(doc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(sum, digest.Sum(nil)) {
				t.Fatalf("digest of %q differs from OPA's", raw)
			}
		}
	})
}
