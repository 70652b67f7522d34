// Package jose builds JSON Web Keys, key sets and signed JWTs for tests,
// with the standard library's crypto only: the tokens are made
// independently of the JWT library the code under test verifies them
// with, and may be malformed on purpose (any header, any segments, an
// algorithm the key was not published for).
package jose

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
)

// B64 is the unpadded base64url encoding of b, as JOSE writes bytes.
func B64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// Segment is the base64url JSON encoding of a header or claim set. It
// panics when v cannot be encoded, which only a test's mistake causes.
func Segment(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("jose: encode segment: %v", err))
	}
	return B64(b)
}

// RSAJWK is the public JWK of pub with kid and no alg or use. It is built
// by hand, as libraries refuse to import a key below 2048 bits.
func RSAJWK(kid string, pub *rsa.PublicKey) map[string]any {
	return map[string]any{"kty": "RSA", "kid": kid, "n": B64(pub.N.Bytes()), "e": B64(big.NewInt(int64(pub.E)).Bytes())}
}

// ECJWK is the public JWK of pub (P-256, P-384 or P-521) with kid and no
// alg or use.
func ECJWK(kid string, pub *ecdsa.PublicKey) map[string]any {
	size := (pub.Curve.Params().BitSize + 7) / 8
	point, err := pub.Bytes() // 0x04 || X || Y
	if err != nil {
		panic(fmt.Sprintf("jose: EC public key: %v", err))
	}
	return map[string]any{"kty": "EC", "kid": kid, "crv": pub.Curve.Params().Name,
		"x": B64(point[1 : 1+size]), "y": B64(point[1+size:])}
}

// JWKS is the JSON of a key set holding keys.
func JWKS(keys ...map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		panic(fmt.Sprintf("jose: encode key set: %v", err))
	}
	return b
}
