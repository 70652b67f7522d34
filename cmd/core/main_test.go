package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// result is what one run of core produced.
type result struct {
	code           int
	stdout, stderr string
}

// run runs core in-process with args, "$TMP" in them standing for tmp.
func run(t *testing.T, tmp string, args ...string) result {
	t.Helper()
	argv := make([]string, len(args))
	for i, a := range args {
		argv[i] = strings.ReplaceAll(a, "$TMP", tmp)
	}
	var stdout, stderr bytes.Buffer
	code := Execute(argv, &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// volatile parts of the output and what goldens show instead.
var normalizers = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`), "<decision-id>"},
	{regexp.MustCompile(`\d+\.\d µs`), "<n> µs"},
	{regexp.MustCompile(`"(p50|p95|p99|p999|max|mean)_us": [-+.e0-9]+`), `"${1}_us": <n>`},
	{regexp.MustCompile(`"(allocs|bytes)_per_op": [-+.e0-9]+`), `"${1}_per_op": <n>`},
	{regexp.MustCompile(`"cpu_per_op_us": [-+.e0-9]+`), `"cpu_per_op_us": <n>`},
	{regexp.MustCompile(`((?:allocs|bytes)/op:\s+)\d+`), "${1}<n>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`), "<time>"},
	{regexp.MustCompile(`\b\d{8}T\d{6}Z\b`), "<revision>"},
}

func normalize(s, tmp string) string {
	s = strings.ReplaceAll(s, tmp, "$TMP")
	for _, n := range normalizers {
		s = n.re.ReplaceAllString(s, n.repl)
	}
	return s
}

// golden compares got with testdata/golden/name.txt, or rewrites it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	testkit.Golden(t, *update, filepath.Join("testdata", "golden", name+".txt"), []byte(got))
}

// checkOneJSON fails unless s is exactly one JSON document.
func checkOneJSON(t *testing.T, s string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, s)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Fatalf("stdout holds more than one JSON document:\n%s", s)
	}
}

// keyFiles writes generated keys to dir: ec.pem/ec.pub (P-256),
// other.pub (another P-256 key), rsa.pem/rsa.pub (RSA 2048).
func keyFiles(t *testing.T, dir string) {
	t.Helper()
	write := func(name string, b []byte) {
		testkit.WriteFile(t, filepath.Join(dir, name), b)
	}
	for _, name := range []string{"ec", "other"} {
		private, public := testkit.ECKeyPEM(t)
		write(name+".pem", private)
		write(name+".pub", public)
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	write("rsa.pem", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)}))
	write("rsa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
}

// tamper copies the bundle src to dst with edit applied to the named
// file, keeping the signature.
func tamper(t *testing.T, src, dst, name string, edit func([]byte) []byte) {
	t.Helper()
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out bytes.Buffer
	gw := gzip.NewWriter(&out)
	tw := tar.NewWriter(gw)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Name == name {
			body = edit(body)
		}
		hdr.Size = int64(len(body))
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFileMode(t, dst, out.Bytes(), 0o644)
}

// workspace sets up a temporary directory with keys and bundles: signed
// (ES256, revision r1), signed-ps (PS256), unsigned, and tampered (the
// signed bundle with its policy edited).
func workspace(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	keyFiles(t, tmp)
	for _, b := range [][]string{
		{"policy", "bundle", "--dir", "testdata/policy", "--sign-key", "$TMP/ec.pem", "--revision", "r1", "--output", "$TMP/signed.tar.gz"},
		{"policy", "bundle", "--dir", "testdata/policy", "--sign-key", "$TMP/rsa.pem", "--alg", "PS256", "--key-id", "ci", "--revision", "r2", "--output", "$TMP/signed-ps.tar.gz"},
		{"policy", "bundle", "--dir", "testdata/policy", "--revision", "r3", "--output", "$TMP/unsigned.tar.gz"},
	} {
		if r := run(t, tmp, b...); r.code != 0 {
			t.Fatalf("core %s: exit %d\n%s%s", strings.Join(b, " "), r.code, r.stdout, r.stderr)
		}
	}
	tamper(t, filepath.Join(tmp, "signed.tar.gz"), filepath.Join(tmp, "tampered.tar.gz"), "/authz.rego", func(b []byte) []byte {
		return bytes.Replace(b, []byte("default allow := false"), []byte("default allow := true"), 1)
	})
	testkit.WriteFileMode(t, filepath.Join(tmp, "garbage.tar.gz"), []byte("not a bundle"), 0o644)
	return tmp
}
