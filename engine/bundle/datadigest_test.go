package bundle_test

import (
	"bytes"
	"crypto/elliptic"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	opabundle "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/svc-dev/svc/engine/bundle"
)

// signedByOPA packs files into a bundle signed by OPA's own signer: each
// file's digest computed by OPA's hasher, as `opa sign` computes it.
func signedByOPA(t *testing.T, key keyPair, files []entry) []byte {
	t.Helper()
	hasher, err := opabundle.NewSignatureHasher(opabundle.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	var infos []opabundle.FileInfo
	for _, f := range files {
		var v any = f.body
		if opabundle.IsStructuredDoc(f.name) {
			if err := util.Unmarshal(f.body, &v); err != nil {
				t.Fatal(err)
			}
		}
		sum, err := hasher.HashFile(v)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, opabundle.FileInfo{Name: strings.TrimPrefix(f.name, "/"), Hash: hex.EncodeToString(sum), Algorithm: "SHA-256"})
	}
	token, err := opabundle.GenerateSignedToken(infos, opabundle.NewSigningConfig(string(key.private), "ES256", ""), "default")
	if err != nil {
		t.Fatal(err)
	}
	sigs, err := json.Marshal(opabundle.SignaturesConfig{Signatures: []string{token}})
	if err != nil {
		t.Fatal(err)
	}
	return pack(t, append(files, entry{"/.signatures.json", sigs}))
}

// TestDataDigestsAsOPA signs bundles of several data files with OPA's
// signer, alters a data file in ways that change the document or only
// its spelling, and checks that Verify and Load judge each exactly as
// OPA's reader does, and load the data OPA's reader loads.
func TestDataDigestsAsOPA(t *testing.T) {
	key := ecKey(t, elliptic.P256())
	src, err := os.ReadFile(filepath.Join(defaultPolicyDir, "authz.rego"))
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat(`"pad-`+strings.Repeat("x", 100)+`",`, 30)
	rootData := `{"svc":{"t":{"a":{"n":1.50,"e":1e3,"s":"A<&>\u00e9","nil":null,"f":false,"l":[1,{"k":"v"}]},"b":{"big":[` + big + `0]}},"top":2}}`
	files := []entry{
		{"/.manifest", []byte(`{"revision":"r1","roots":["svc"]}`)},
		{"/authz.rego", src},
		{"/data.json", []byte(rootData)},
		{"/svc/x/data.json", []byte(`{"k":[3,2,1],"deep":{"z":1,"a":2}}`)},
		{"/svc/y/data.yaml", []byte("list: [1, 2]\nname: yaml\nnum: 1.0\n")},
		{"/svc/z/data.json", []byte(`[1,2,3]`)},
	}
	signed := signedByOPA(t, key, files)
	edits := []struct {
		name, file string
		edit       func([]byte) []byte
	}{
		{"unchanged", "/data.json", func(b []byte) []byte { return b }},
		{"white space", "/data.json", func(b []byte) []byte { return bytes.ReplaceAll(b, []byte(`,`), []byte(" ,\n\t")) }},
		{"trailing newline", "/data.json", func(b []byte) []byte { return append(b, '\n') }},
		{"key order", "/svc/x/data.json", func([]byte) []byte { return []byte(`{"deep":{"a":2,"z":1},"k":[3,2,1]}`) }},
		{"array order", "/svc/x/data.json", func([]byte) []byte { return []byte(`{"k":[1,2,3],"deep":{"z":1,"a":2}}`) }},
		{"leaf", "/data.json", func(b []byte) []byte { return bytes.Replace(b, []byte(`"top":2`), []byte(`"top":3`), 1) }},
		{"leaf in a large object", "/data.json", func(b []byte) []byte { return bytes.Replace(b, []byte(`0]}`), []byte(`1]}`), 1) }},
		{"number spelling 1.50", "/data.json", func(b []byte) []byte { return bytes.Replace(b, []byte(`1.50`), []byte(`1.5`), 1) }},
		{"number spelling 1e3", "/data.json", func(b []byte) []byte { return bytes.Replace(b, []byte(`1e3`), []byte(`1000`), 1) }},
		{"string escape", "/data.json", func(b []byte) []byte { return bytes.Replace(b, []byte(`"A<&>\u00e9"`), []byte(`"\u0041<&>é"`), 1) }},
		{"duplicate key, last kept", "/data.json", func(b []byte) []byte { return bytes.Replace(b, []byte(`"top":2`), []byte(`"top":9,"top":2`), 1) }},
		{"member added", "/svc/x/data.json", func([]byte) []byte { return []byte(`{"k":[3,2,1],"deep":{"z":1,"a":2},"more":1}`) }},
		{"null for false", "/data.json", func(b []byte) []byte { return bytes.Replace(b, []byte(`"f":false`), []byte(`"f":null`), 1) }},
		{"yaml spelling", "/svc/y/data.yaml", func([]byte) []byte { return []byte("name: yaml\nlist:\n  - 1\n  - 2\nnum: 1.0\n") }},
		{"yaml value", "/svc/y/data.yaml", func([]byte) []byte { return []byte("list: [1, 2]\nname: yaml\nnum: 2\n") }},
		{"array file", "/svc/z/data.json", func([]byte) []byte { return []byte(`[1, 2, 3]`) }},
		{"array file altered", "/svc/z/data.json", func([]byte) []byte { return []byte(`[1,2]`) }},
		{"not JSON", "/svc/z/data.json", func([]byte) []byte { return []byte(`[1,2,3`) }},
		{"trailing value", "/svc/z/data.json", func([]byte) []byte { return []byte(`[1,2,3] [4]`) }},
	}
	accepted, rejected := 0, 0
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			raw := rewrite(t, signed, replace(e.file, e.edit))
			vc := opabundle.NewVerificationConfig(map[string]*opabundle.KeyConfig{"k": {Key: string(key.public), Algorithm: "ES256"}}, "k", "", nil)
			ob, opaErr := opabundle.NewReader(bytes.NewReader(raw)).WithBundleVerificationConfig(vc).WithRegoVersion(ast.RegoV1).Read()
			_, err := bundle.Verify(bytes.NewReader(raw), key.public)
			set, lerr := bundle.Load(bytes.NewReader(raw), &bundle.VerifyOptions{PublicKeyPEM: key.public})
			if (opaErr == nil) != (err == nil) || (err == nil) != (lerr == nil) {
				t.Fatalf("OPA's reader: %v; Verify: %v; Load: %v", opaErr, err, lerr)
			}
			if opaErr != nil {
				rejected++
				return
			}
			accepted++
			var want any = ob.Data
			if err := util.RoundTrip(&want); err != nil {
				t.Fatal(err)
			}
			if got := set.Data(); !cmp.Equal(got, want) {
				t.Fatalf("loaded data differs from OPA's:\n%s", cmp.Diff(want, got))
			}
		})
	}
	if accepted == 0 || rejected == 0 {
		t.Fatalf("%d accepted, %d rejected: the edits do not tell", accepted, rejected)
	}
}
