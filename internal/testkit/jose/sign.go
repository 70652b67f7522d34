package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"fmt"
	"math/big"
)

// Sign returns input, a JWS signing input ("header.payload", whatever
// its segments hold), followed by "." and its signature under alg with
// key: RS256 and PS256 with an *rsa.PrivateKey, ES256 with an
// *ecdsa.PrivateKey, HS256 with a []byte secret. Any other alg ("none"
// among them) gets an empty signature.
func Sign(alg, input string, key any) (string, error) {
	digest := sha256.Sum256([]byte(input))
	var sig []byte
	var err error
	switch alg {
	case "RS256", "PS256":
		k, ok := key.(*rsa.PrivateKey)
		if !ok {
			return "", fmt.Errorf("jose: %s needs an RSA key, not %T", alg, key)
		}
		if alg == "RS256" {
			sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:])
		} else {
			sig, err = rsa.SignPSS(rand.Reader, k, crypto.SHA256, digest[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		}
	case "ES256":
		k, ok := key.(*ecdsa.PrivateKey)
		if !ok {
			return "", fmt.Errorf("jose: ES256 needs an EC key, not %T", key)
		}
		var r, s *big.Int
		if r, s, err = ecdsa.Sign(rand.Reader, k, digest[:]); err == nil {
			sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
		}
	case "HS256":
		secret, ok := key.([]byte)
		if !ok {
			return "", fmt.Errorf("jose: HS256 needs a []byte secret, not %T", key)
		}
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(input))
		sig = m.Sum(nil)
	}
	if err != nil {
		return "", fmt.Errorf("jose: sign %s: %w", alg, err)
	}
	return input + "." + B64(sig), nil
}

// MustSign is Sign that panics on an error, for tests whose keys are
// known to fit.
func MustSign(alg, input string, key any) string {
	tok, err := Sign(alg, input, key)
	if err != nil {
		panic(err)
	}
	return tok
}
