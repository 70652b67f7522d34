package bundle_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/bundletest"
)

// defaultPolicyDir is the default policy shipped with the service.
const defaultPolicyDir = "../../policies"

// created is the creation time the tests record, for stable output.
var created = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// keyPair is a generated key as PEM: the private key to sign with and the
// public key to verify with.
type keyPair struct {
	private []byte
	public  []byte
}

func ecKey(tb testing.TB, curve elliptic.Curve) keyPair {
	tb.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		tb.Fatal(err)
	}
	return keyPair{
		private: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
		public:  testkit.PublicKeyPEM(tb, &k.PublicKey),
	}
}

func rsaKey(tb testing.TB, bits int) keyPair {
	tb.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		tb.Fatal(err)
	}
	return keyPair{
		private: testkit.PrivateKeyPEM(tb, k),
		public:  testkit.PublicKeyPEM(tb, &k.PublicKey),
	}
}

// build builds dir into a bundle in memory.
func build(tb testing.TB, dir string, opts bundle.BuildOptions) []byte {
	tb.Helper()
	if opts.CreatedAt.IsZero() {
		opts.CreatedAt = created
	}
	return bundletest.Build(tb, dir, opts)
}

// entry is one file of a tar archive, in archive order.
type entry struct {
	name string
	body []byte
}

func unpack(tb testing.TB, archive []byte) []entry {
	tb.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		tb.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out []entry
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, entry{hdr.Name, body})
	}
}

func pack(tb testing.TB, entries []entry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o600, Size: int64(len(e.body)), Typeflag: tar.TypeReg}); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write(e.body); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// rewrite unpacks archive, lets edit change the file list and packs it
// again; signatures are kept as they were.
func rewrite(tb testing.TB, archive []byte, edit func([]entry) []entry) []byte {
	tb.Helper()
	return pack(tb, edit(unpack(tb, archive)))
}

// replace returns an edit that sets the body of the named file.
func replace(name string, change func([]byte) []byte) func([]entry) []entry {
	return func(es []entry) []entry {
		for i := range es {
			if es[i].name == name {
				es[i].body = change(es[i].body)
			}
		}
		return es
	}
}

// readInput decodes a fixture input of the default policy.
func readInput(tb testing.TB, name string) any {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(defaultPolicyDir, "fixtures", name+".input.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		tb.Fatal(err)
	}
	return v
}

func eval(tb testing.TB, set *policy.Set, input any) policy.Result {
	tb.Helper()
	res, err := set.EvalValue(context.Background(), input)
	if err != nil {
		tb.Fatal(err)
	}
	return res
}
