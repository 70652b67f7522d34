package bundle_test

import (
	"bytes"
	"crypto/elliptic"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/policy"
)

func TestRoundTrip(t *testing.T) {
	ec, rs := ecKey(t, elliptic.P256()), rsaKey(t, 2048)
	tests := []struct {
		name    string
		key     keyPair
		alg     string
		wantAlg string
	}{
		{name: "ES256 by default for an EC key", key: ec, wantAlg: "ES256"},
		{name: "RS256 by default for an RSA key", key: rs, wantAlg: "RS256"},
		{name: "PS256 on request", key: rs, alg: "PS256", wantAlg: "PS256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := build(t, defaultPolicyDir, bundle.BuildOptions{
				Revision: "rev-42", SignKeyPEM: tt.key.private, KeyID: "ci-2026", Alg: tt.alg,
			})
			want := bundle.Info{
				Revision:  "rev-42",
				Roots:     []string{"svc"},
				CreatedAt: created,
				Policies:  []string{"authz.rego"},
				DataFiles: []string{"data.json"},
				Signature: &bundle.Signature{Alg: tt.wantAlg, KeyID: "ci-2026", Files: 3},
			}

			got, err := bundle.Inspect(bytes.NewReader(raw))
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Inspect (-want +got):\n%s", diff)
			}

			want.Verified = true
			got, err = bundle.Verify(bytes.NewReader(raw), tt.key.public)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Verify (-want +got):\n%s", diff)
			}

			set, err := bundle.Load(bytes.NewReader(raw), &bundle.VerifyOptions{PublicKeyPEM: tt.key.public, KeyID: "ci-2026"})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if set.Revision() != "rev-42" {
				t.Errorf("revision = %q, want rev-42", set.Revision())
			}
			if res := eval(t, set, readInput(t, "editor-update-allowed")); !res.Allow || len(res.DenyReasons) != 0 {
				t.Errorf("allowed fixture: got %+v", res)
			}
			res := eval(t, set, readInput(t, "multiple-reasons-denied"))
			wantReasons := []string{"plan-required: enterprise", "role-forbidden: viewer cannot reports:export", "tenant-mismatch"}
			if res.Allow || !cmp.Equal(res.DenyReasons, wantReasons) {
				t.Errorf("denied fixture: got %+v, want reasons %q", res, wantReasons)
			}
		})
	}
}

func TestBuildUnsignedAndDefaults(t *testing.T) {
	var buf bytes.Buffer
	info, err := bundle.Build(&buf, defaultPolicyDir, bundle.BuildOptions{CreatedAt: created})
	if err != nil {
		t.Fatal(err)
	}
	if info.Revision != "20260301T120000Z" {
		t.Errorf("default revision = %q, want the creation time", info.Revision)
	}
	if info.Signature != nil {
		t.Errorf("unsigned bundle has signature %+v", info.Signature)
	}
	set, err := bundle.Load(bytes.NewReader(buf.Bytes()), nil)
	if err != nil {
		t.Fatalf("Load without verification: %v", err)
	}
	if !eval(t, set, readInput(t, "admin-delete-allowed")).Allow {
		t.Error("admin-delete-allowed denied after the round trip")
	}
}

func TestBuildData(t *testing.T) {
	key := ecKey(t, elliptic.P256())
	raw := build(t, "testdata/withdata", bundle.BuildOptions{SignKeyPEM: key.private})
	info, err := bundle.Verify(bytes.NewReader(raw), key.public)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"svc", "tenants"}; !cmp.Equal(info.Roots, want) {
		t.Errorf("roots = %q, want %q", info.Roots, want)
	}
	if want := []string{"authz.rego", "svc/lib/helpers.rego"}; !cmp.Equal(info.Policies, want) {
		t.Errorf("policies = %q, want %q", info.Policies, want)
	}
	set, err := bundle.Load(bytes.NewReader(raw), &bundle.VerifyOptions{PublicKeyPEM: key.public})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		input   map[string]any
		allow   bool
		reasons []string
	}{
		{"admin of an active tenant", inputOf("owner", "acme"), true, []string{}},
		{"editor", inputOf("editor", "acme"), false, []string{"not-admin"}},
		{"inactive tenant", inputOf("admin", "initech"), false, []string{"tenant-inactive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := eval(t, set, tc.input)
			if res.Allow != tc.allow || !cmp.Equal(res.DenyReasons, tc.reasons) {
				t.Errorf("got allow=%v reasons=%q, want allow=%v reasons=%q", res.Allow, res.DenyReasons, tc.allow, tc.reasons)
			}
		})
	}
}

func inputOf(role, tenant string) map[string]any {
	return map[string]any{
		"action": "orders:read",
		"user":   map[string]any{"role": role},
		"tenant": map[string]any{"id": tenant},
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		opts bundle.BuildOptions
		want string
	}{
		{"missing directory", "testdata/does-not-exist", bundle.BuildOptions{}, "does-not-exist"},
		{"package outside the roots", "testdata/outside-root", bundle.BuildOptions{}, "package helpers is outside the bundle roots"},
		{"weak RSA key", defaultPolicyDir, bundle.BuildOptions{SignKeyPEM: rsaKey(t, 1024).private}, "RSA key of 1024 bits is too weak"},
		{"P-384 key", defaultPolicyDir, bundle.BuildOptions{SignKeyPEM: ecKey(t, elliptic.P384()).private}, "curve P-384 is not supported"},
		{"ES256 with an RSA key", defaultPolicyDir, bundle.BuildOptions{SignKeyPEM: rsaKey(t, 2048).private, Alg: "ES256"}, `algorithm "ES256" does not fit the RSA key`},
		{"HS256", defaultPolicyDir, bundle.BuildOptions{SignKeyPEM: ecKey(t, elliptic.P256()).private, Alg: "HS256"}, `algorithm "HS256" does not fit`},
		{"public key as signing key", defaultPolicyDir, bundle.BuildOptions{SignKeyPEM: ecKey(t, elliptic.P256()).public}, "no PEM private key found"},
		{"not PEM", defaultPolicyDir, bundle.BuildOptions{SignKeyPEM: []byte("not a key")}, "no PEM private key found"},
		{"algorithm without key", defaultPolicyDir, bundle.BuildOptions{Alg: "ES256"}, "without a signing key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			_, err := bundle.Build(&buf, tt.dir, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build error = %v, want one containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY-----") || strings.Contains(err.Error(), "BEGIN") {
				t.Errorf("error shows key material: %v", err)
			}
		})
	}
}

func TestBuildCompileErrorIsPolicyError(t *testing.T) {
	var buf bytes.Buffer
	_, err := bundle.Build(&buf, "../policy/testdata/load/syntax-error", bundle.BuildOptions{})
	var perr *policy.Error
	if !errors.As(err, &perr) {
		t.Fatalf("error = %v (%T), want *policy.Error", err, err)
	}
}

func TestSigningKeyAfterParameters(t *testing.T) {
	// openssl ecparam -genkey writes an EC PARAMETERS block first.
	key := ecKey(t, elliptic.P256())
	params := "-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"
	raw := build(t, defaultPolicyDir, bundle.BuildOptions{SignKeyPEM: append([]byte(params), key.private...)})
	if _, err := bundle.Verify(bytes.NewReader(raw), key.public); err != nil {
		t.Fatal(err)
	}
}

func TestSignatureClaimsAreEncoded(t *testing.T) {
	key := ecKey(t, elliptic.P256())
	raw := build(t, defaultPolicyDir, bundle.BuildOptions{SignKeyPEM: key.private, KeyID: "k1"})
	for _, e := range unpack(t, raw) {
		if e.name != "/.signatures.json" {
			continue
		}
		if bytes.Contains(e.body, []byte("PRIVATE")) {
			t.Fatal("signature file holds key material")
		}
		tok := strings.Trim(strings.SplitN(string(e.body), `"`, 5)[3], `"`)
		hdr, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(hdr), `"kid":"k1"`) || !strings.Contains(string(hdr), `"alg":"ES256"`) {
			t.Errorf("JWS header = %s, want alg ES256 and kid k1", hdr)
		}
		return
	}
	t.Fatal("no /.signatures.json in the bundle")
}
