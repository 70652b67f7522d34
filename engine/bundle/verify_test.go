package bundle_test

import (
	"bytes"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/internal/testkit"
)

func TestVerifyRejects(t *testing.T) {
	ec, otherEC, rs := ecKey(t, elliptic.P256()), ecKey(t, elliptic.P256()), rsaKey(t, 2048)
	signed := build(t, defaultPolicyDir, bundle.BuildOptions{SignKeyPEM: ec.private, Revision: "r1"})
	signedPS := build(t, defaultPolicyDir, bundle.BuildOptions{SignKeyPEM: rs.private, Alg: "PS256"})
	unsigned := build(t, defaultPolicyDir, bundle.BuildOptions{})
	otherSigned := build(t, "testdata/withdata", bundle.BuildOptions{SignKeyPEM: ec.private})

	sigOf := func(archive []byte) []byte {
		for _, e := range unpack(t, archive) {
			if e.name == "/.signatures.json" {
				return e.body
			}
		}
		t.Fatal("bundle has no signature")
		return nil
	}
	// withHeader replaces the JWS header of the signature, keeping the
	// payload and signature bytes.
	withHeader := func(hdr string) func([]byte) []byte {
		return func(b []byte) []byte {
			var sc struct{ Signatures []string }
			if err := json.Unmarshal(b, &sc); err != nil {
				t.Fatal(err)
			}
			parts := strings.Split(sc.Signatures[0], ".")
			parts[0] = base64.RawURLEncoding.EncodeToString([]byte(hdr))
			out, _ := json.Marshal(map[string]any{"signatures": []string{strings.Join(parts, ".")}})
			return out
		}
	}
	setSigs := func(body string) func([]byte) []byte { return func([]byte) []byte { return []byte(body) } }

	tests := []struct {
		name   string
		bundle []byte
		opts   bundle.VerifyOptions
		want   string
	}{
		{
			name: "tampered policy",
			bundle: rewrite(t, signed, replace("/authz.rego", func(b []byte) []byte {
				return append(b, "\nallow if input.user.id == \"mallory\"\n"...)
			})),
			want: "authz.rego: digest mismatch",
		},
		{
			name:   "tampered manifest",
			bundle: rewrite(t, signed, replace("/.manifest", func(b []byte) []byte { return bytes.Replace(b, []byte(`"r1"`), []byte(`"r2"`), 1) })),
			want:   ".manifest: digest mismatch",
		},
		{
			name:   "tampered data",
			bundle: rewrite(t, signed, replace("/data.json", func([]byte) []byte { return []byte(`{"svc":{"authz":{"extra":true}}}`) })),
			want:   "data.json: digest mismatch",
		},
		{
			name: "file added",
			bundle: rewrite(t, signed, func(es []entry) []entry {
				return append(es, entry{"/backdoor.rego", []byte("package svc.authz\n\nallow if input.user.id == \"mallory\"\n")})
			}),
			want: "backdoor.rego not included in bundle signature",
		},
		{
			name: "file removed",
			bundle: rewrite(t, signed, func(es []entry) []entry {
				var out []entry
				for _, e := range es {
					if e.name != "/authz.rego" {
						out = append(out, e)
					}
				}
				return out
			}),
			want: "specified in bundle signatures but not found",
		},
		{
			name:   "signature of another bundle",
			bundle: rewrite(t, otherSigned, replace("/.signatures.json", func([]byte) []byte { return sigOf(signed) })),
			want:   "digest mismatch",
		},
		{name: "wrong key", bundle: signed, opts: bundle.VerifyOptions{PublicKeyPEM: otherEC.public}, want: "failed to verify JWT signature"},
		{name: "RSA key for an ES256 bundle", bundle: signed, opts: bundle.VerifyOptions{PublicKeyPEM: rs.public}, want: `algorithm "ES256" does not fit the RSA key`},
		{name: "unsigned", bundle: unsigned, want: "bundle is not signed"},
		{
			name: "signature file moved to a subdirectory",
			bundle: rewrite(t, signed, func(es []entry) []entry {
				for i := range es {
					if es[i].name == "/.signatures.json" {
						es[i].name = "/sub/.signatures.json"
					}
				}
				return es
			}),
			want: "bundle is not signed",
		},
		{name: "empty signature file", bundle: rewrite(t, signed, replace("/.signatures.json", setSigs(`{}`))), want: "want exactly one signature, found 0"},
		{name: "empty signature list", bundle: rewrite(t, signed, replace("/.signatures.json", setSigs(`{"signatures":[]}`))), want: "want exactly one signature, found 0"},
		{name: "two signatures", bundle: rewrite(t, signed, replace("/.signatures.json", setSigs(`{"signatures":["a.b.c","a.b.c"]}`))), want: "want exactly one signature, found 2"},
		{name: "signature plugin", bundle: rewrite(t, signed, replace("/.signatures.json", setSigs(`{"signatures":["a.b.c"],"plugin":"custom"}`))), want: `signature plugin "custom" is not supported`},
		{name: "garbage signature", bundle: rewrite(t, signed, replace("/.signatures.json", setSigs(`{"signatures":["not-a-jws"]}`))), want: "not a compact JWS"},
		{name: "alg none", bundle: rewrite(t, signed, replace("/.signatures.json", withHeader(`{"alg":"none","kid":"default"}`))), want: `algorithm "none" does not fit`},
		{name: "HS256 with an RSA public key", bundle: rewrite(t, signedPS, replace("/.signatures.json", withHeader(`{"alg":"HS256","kid":"default"}`))), opts: bundle.VerifyOptions{PublicKeyPEM: rs.public}, want: `algorithm "HS256" does not fit`},
		{name: "RS256 header on a PS256 signature", bundle: rewrite(t, signedPS, replace("/.signatures.json", withHeader(`{"alg":"RS256","kid":"default"}`))), opts: bundle.VerifyOptions{PublicKeyPEM: rs.public}, want: "failed to verify JWT signature"},
		{name: "key id mismatch", bundle: signed, opts: bundle.VerifyOptions{PublicKeyPEM: ec.public, KeyID: "prod"}, want: `signed with key id "default", want "prod"`},
		{name: "algorithm pinned", bundle: signedPS, opts: bundle.VerifyOptions{PublicKeyPEM: rs.public, Alg: "RS256"}, want: "signed with PS256, want RS256"},
		{name: "no verification key", bundle: signed, opts: bundle.VerifyOptions{PublicKeyPEM: []byte{}}, want: "no verification key given"},
		{name: "private key as verification key", bundle: signed, opts: bundle.VerifyOptions{PublicKeyPEM: ec.private}, want: "is a private key"},
		{name: "weak RSA verification key", bundle: signedPS, opts: bundle.VerifyOptions{PublicKeyPEM: rsaKey(t, 1024).public}, want: "RSA key of 1024 bits is too weak"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			if opts.PublicKeyPEM == nil {
				opts.PublicKeyPEM = ec.public
			}
			_, err := bundle.Load(bytes.NewReader(tt.bundle), &opts)
			checkRejected(t, "Load", err, tt.want)
			if opts.KeyID == "" && opts.Alg == "" {
				_, err = bundle.Verify(bytes.NewReader(tt.bundle), opts.PublicKeyPEM)
				checkRejected(t, "Verify", err, tt.want)
			}
		})
	}
}

func checkRejected(t *testing.T, op string, err error, want string) {
	t.Helper()
	var verr *bundle.VerificationError
	if !errors.As(err, &verr) {
		t.Fatalf("%s error = %v (%T), want a *bundle.VerificationError", op, err, err)
	}
	if !strings.Contains(verr.Reason(), want) {
		t.Errorf("%s reason = %q, want it to contain %q", op, verr.Reason(), want)
	}
	if strings.Contains(err.Error(), "BEGIN") {
		t.Errorf("%s error shows key material: %v", op, err)
	}
}

func TestUnsignedIsErrUnsigned(t *testing.T) {
	key := ecKey(t, elliptic.P256())
	_, err := bundle.Verify(bytes.NewReader(build(t, defaultPolicyDir, bundle.BuildOptions{})), key.public)
	if !errors.Is(err, bundle.ErrUnsigned) {
		t.Fatalf("error = %v, want ErrUnsigned", err)
	}
}

func TestVerifyCertificate(t *testing.T) {
	// A certificate is accepted in place of a public key; issue one
	// for the signing key.
	signer := testkit.NewCA(t, "bundle CA").Server(t)
	raw := build(t, defaultPolicyDir, bundle.BuildOptions{SignKeyPEM: signer.KeyPEM})
	if _, err := bundle.Verify(bytes.NewReader(raw), signer.CertPEM); err != nil {
		t.Fatal(err)
	}
}

func TestReadMalformed(t *testing.T) {
	valid := build(t, defaultPolicyDir, bundle.BuildOptions{})
	// malformed says whether the archive itself is broken (ErrMalformed,
	// CheckArchive fails) rather than its content.
	tests := []struct {
		name      string
		raw       []byte
		want      string
		malformed bool
	}{
		{"empty", nil, "not a gzip archive", true},
		{"not gzip", []byte("hello"), "not a gzip archive", true},
		{"truncated", valid[:len(valid)/2], "unexpected EOF", true},
		{"no files", pack(t, nil), "holds no files", true},
		{"bad manifest", rewrite(t, valid, replace("/.manifest", func([]byte) []byte { return []byte("{") })), "decode .manifest", true},
		{"bad rego", rewrite(t, valid, replace("/authz.rego", func([]byte) []byte { return []byte("package svc.authz\nallow if {") })), "read bundle", false},
		{"module outside roots", rewrite(t, valid, func(es []entry) []entry {
			return append(es, entry{"/x.rego", []byte("package other\n")})
		}), "do not permit", false},
		{"duplicate file", rewrite(t, valid, func(es []entry) []entry { return append(es, es[len(es)-1]) }), "twice", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bundle.Inspect(bytes.NewReader(tt.raw))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Inspect error = %v, want one containing %q", err, tt.want)
			}
			var verr *bundle.VerificationError
			if errors.As(err, &verr) {
				t.Errorf("malformed bundle reported as a verification failure: %v", err)
			}
			if _, err := bundle.Load(bytes.NewReader(tt.raw), nil); err == nil {
				t.Error("Load accepted a malformed bundle")
			}
			if got := errors.Is(err, bundle.ErrMalformed); got != tt.malformed {
				t.Errorf("errors.Is(err, ErrMalformed) = %v, want %v: %v", got, tt.malformed, err)
			}
			if err := bundle.CheckArchive(bytes.NewReader(tt.raw)); (err != nil) != tt.malformed || (err != nil && !errors.Is(err, bundle.ErrMalformed)) {
				t.Errorf("CheckArchive = %v, want an ErrMalformed error: %v", err, tt.malformed)
			}
		})
	}
	if err := bundle.CheckArchive(bytes.NewReader(valid)); err != nil {
		t.Errorf("CheckArchive of a valid bundle: %v", err)
	}
}
