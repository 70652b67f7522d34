package token_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

var update = flag.Bool("update", false, "regenerate testdata/ (keys, JWKS, tokens and their expected reasons)")

const (
	testdataJWKS   = "testdata/jwks.json"
	testdataTokens = "testdata/tokens"
	testdataExpect = "testdata/expect.json"
)

// testdataCases are the tokens written to testdata/tokens by -update, with
// the reason each must get at t0. They seed FuzzVerify.
func testdataCases(t *testing.T) map[string]struct {
	token string
	want  reason.Code
} {
	k := keys()
	pubPEM := testkit.PublicKeyPEM(t, &k.rsa.PublicKey)
	valid := signClaims(hdr("RS256", "rs", nil), claims(), k.rsaRS)
	p := strings.Split(valid, ".")
	type tc = struct {
		token string
		want  reason.Code
	}
	return map[string]tc{
		"valid-rs256":         {valid, reason.OK},
		"valid-ps256":         {signClaims(hdr("PS256", "ps", nil), claims(), k.rsaPS), reason.OK},
		"valid-es256":         {signClaims(hdr("ES256", "ec", nil), claims(), k.ec), reason.OK},
		"valid-ps256-no-alg":  {signClaims(hdr("PS256", "rsa", nil), claims(), k.rsa), reason.OK},
		"valid-jku-ignored":   {signClaims(hdr("RS256", "rsa", map[string]any{"jku": "https://attacker.example/jwks.json", "x5u": "https://attacker.example/cert.pem"}), claims(), k.rsa), reason.OK},
		"alg-none":            {b64(mustJSON(hdr("none", "rs", nil))) + "." + p[1] + ".", reason.AlgNotAllowed},
		"hs256-public-pem":    {signClaims(hdr("HS256", "rsa", nil), claims(), pubPEM), reason.AlgNotAllowed},
		"ps256-on-rs256-key":  {signClaims(hdr("PS256", "rs", nil), claims(), k.rsaRS), reason.AlgNotAllowed},
		"rs256-on-ec-key":     {signClaims(hdr("RS256", "ec", nil), claims(), k.rsa), reason.AlgNotAllowed},
		"unknown-kid":         {signClaims(hdr("RS256", "gone", nil), claims(), k.rsa), reason.UnknownKID},
		"weak-key":            {signClaims(hdr("RS256", "weak", nil), claims(), k.weak), reason.KeyTooWeak},
		"tampered-payload":    {p[0] + "." + b64(mustJSON(with(map[string]any{"sub": "admin"}))) + "." + p[2], reason.SignatureInvalid},
		"foreign-signature":   {signClaims(hdr("RS256", "rs", nil), claims(), k.attacker), reason.SignatureInvalid},
		"expired":             {signClaims(hdr("ES256", "ec", nil), with(map[string]any{"exp": t0.Add(-time.Minute).Unix()}), k.ec), reason.TokenExpired},
		"not-yet-valid":       {signClaims(hdr("ES256", "ec", nil), with(map[string]any{"nbf": t0.Add(time.Minute).Unix()}), k.ec), reason.TokenNotYetValid},
		"issued-in-future":    {signClaims(hdr("ES256", "ec", nil), with(map[string]any{"iat": t0.Add(time.Minute).Unix()}), k.ec), reason.TokenIssuedInFuture},
		"exp-missing":         {signClaims(hdr("ES256", "ec", nil), with(map[string]any{"exp": nil}), k.ec), reason.TokenMalformed},
		"tenant-missing":      {signClaims(hdr("ES256", "ec", nil), with(map[string]any{"tenant_id": nil}), k.ec), reason.TenantMissing},
		"crit-header":         {signClaims(hdr("ES256", "ec", map[string]any{"crit": []string{"x"}, "x": 1}), claims(), k.ec), reason.TokenMalformed},
		"two-parts":           {p[0] + "." + p[1], reason.TokenMalformed},
		"header-not-json":     {b64([]byte(`{"alg":"RS256",`)) + "." + p[1] + "." + p[2], reason.TokenMalformed},
		"payload-not-object":  {sign(hdr("ES256", "ec", nil), []byte(`["exp",1]`), k.ec), reason.TokenMalformed},
		"escaped-claims":      {sign(hdr("ES256", "ec", nil), []byte(`{"exp":1767272400,"tenant_id":"ac\u006de","n\u00e4me":"\ud83d\ude00","d":[[],{}]}`), k.ec), reason.OK},
		"deeply-nested-claim": {sign(hdr("ES256", "ec", nil), []byte(`{"exp":1767272400,"tenant_id":"acme","x":`+strings.Repeat("[", 100)+strings.Repeat("]", 100)+`}`), k.ec), reason.OK},
	}
}

// writeTestdata regenerates testdata/ from fresh keys. The private keys
// are discarded: the tokens verify only against the committed JWKS.
func writeTestdata(t *testing.T) {
	if err := os.RemoveAll(testdataTokens); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(testdataTokens, 0o755); err != nil {
		t.Fatal(err)
	}
	expect := map[string]reason.Code{}
	for name, c := range testdataCases(t) {
		if err := os.WriteFile(filepath.Join(testdataTokens, name+".jwt"), []byte(c.token+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		expect[name] = c.want
	}
	for path, v := range map[string]any{testdataExpect: expect, testdataJWKS: json.RawMessage(jwksJSON(idpKeys()...))} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// testdataVerifier verifies against the committed JWKS, served over TLS,
// with the clock at t0.
func testdataVerifier(t testing.TB) *token.Verifier {
	t.Helper()
	set, err := os.ReadFile(testdataJWKS)
	if err != nil {
		t.Fatal(err)
	}
	idp := newJWKSServer(t, set)
	now := func() time.Time { return t0 }
	c, err := jwks.New(jwks.Options{URL: idp.Srv.URL + "/jwks.json", Client: idp.Srv.Client(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	v, err := token.New(token.Options{Keys: c, Now: now, CacheSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// testdataTokenFiles returns the committed tokens by name.
func testdataTokenFiles(t testing.TB) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdataTokens, "*.jwt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no tokens in %s (run go test -run TestTestdata -update): %v", testdataTokens, err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".jwt")] = strings.TrimSpace(string(b))
	}
	return out
}

func TestTestdata(t *testing.T) {
	if *update {
		writeTestdata(t)
	}
	b, err := os.ReadFile(testdataExpect)
	if err != nil {
		t.Fatal(err)
	}
	var expect map[string]reason.Code
	if err := json.Unmarshal(b, &expect); err != nil {
		t.Fatal(err)
	}
	toks := testdataTokenFiles(t)
	names := make([]string, 0, len(toks))
	for name := range toks {
		names = append(names, name)
	}
	slices.Sort(names)
	if len(names) != len(expect) {
		t.Fatalf("%d tokens but %d expectations", len(names), len(expect))
	}
	v := testdataVerifier(t)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			want, ok := expect[name]
			if !ok {
				t.Fatalf("no expectation for %s", name)
			}
			_, err := v.Verify(context.Background(), toks[name])
			if got := reason.Of(err, reason.OK); got != want {
				t.Fatalf("code = %q (%v), want %q", got, err, want)
			}
		})
	}
}
