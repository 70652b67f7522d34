package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"math/big"
	"strings"
	"testing"
)

// TestSignVerifies checks each signature with the standard library's
// verifiers, the other half of what the tests' tokens meet.
func TestSignVerifies(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	input := Segment(map[string]any{"alg": "x"}) + "." + Segment(map[string]any{"sub": "u"})
	digest := sha256.Sum256([]byte(input))
	tests := []struct {
		alg    string
		key    any
		verify func(sig []byte) bool
	}{
		{"RS256", rk, func(sig []byte) bool { return rsa.VerifyPKCS1v15(&rk.PublicKey, crypto.SHA256, digest[:], sig) == nil }},
		{"PS256", rk, func(sig []byte) bool { return rsa.VerifyPSS(&rk.PublicKey, crypto.SHA256, digest[:], sig, nil) == nil }},
		{"ES256", ek, func(sig []byte) bool {
			return len(sig) == 64 && ecdsa.Verify(&ek.PublicKey, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
		}},
		{"HS256", secret, func(sig []byte) bool {
			m := hmac.New(sha256.New, secret)
			m.Write([]byte(input))
			return hmac.Equal(sig, m.Sum(nil))
		}},
		{"none", nil, func(sig []byte) bool { return len(sig) == 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.alg, func(t *testing.T) {
			tok, err := Sign(tt.alg, input, tt.key)
			if err != nil {
				t.Fatal(err)
			}
			rest, ok := strings.CutPrefix(tok, input+".")
			if !ok {
				t.Fatalf("token %q does not start with the signing input", tok)
			}
			sig, err := base64.RawURLEncoding.DecodeString(rest)
			if err != nil || !tt.verify(sig) {
				t.Errorf("%s signature %q does not verify (%v)", tt.alg, rest, err)
			}
		})
	}
	if _, err := Sign("RS256", input, ek); err == nil {
		t.Error("RS256 with an EC key: no error")
	}
}
